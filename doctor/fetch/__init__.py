"""fetch-libtorch: catalog + facts → Plan → download → verify → extract → install (tree + record).

plan.py resolves what to fetch and where; download.py streams it (resume, retries);
verify.py checks sha256 and the lock file; extract.py unpacks like unzip and hashes the
tree; wheel.py lays a torch wheel out as a libtorch tree; install.py puts it in place
atomically and writes the install record other commands read (`read_install_record`).
"""
