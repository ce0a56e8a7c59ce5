"""fetch-libtorch: catalog + facts → Plan → archive → install (tree + record).

plan.py resolves what to fetch and where (nothing touched); pipeline.py runs one fetch
(`fetch()`: the per-destination lock (guard.py), already-installed, may-we-replace, lock recording);
source.py gets the archive (download.py streams a URL: resume, retries, redirects checked
one by one; a local --archive; wheel.py's `pip download`); install.py unpacks it beside the
destination (extract.py: like unzip, safely, NAR hash in the same pass), checks it and swaps
it in; record.py is the one home of the install record (`torch-doctor.json` + `.ok`);
destination.py decides whether a directory may be replaced; lock.py reads and writes
libtorch.lock (validated); verify.py compares hashes; names.py keeps names from outside to one
path component and URLs free of secrets; fsops.py holds the file-system steps and turns
their errors into messages.
"""
