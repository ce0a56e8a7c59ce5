"""`sudo doctor fetch-libtorch`: the install works, and then the user's builds cannot use it.
Under sudo the default destination is root's cache (/root/.cache/libtorch), which the user's
`doctor check`, Hasktorch and tch-rs never search; where sudo keeps the user's HOME, the tree
lands in the user's cache but belongs to root, and the next fetch as the user fails on it.
A note, as pip's "running pip as the 'root' user": a system-wide --dest through sudo is fine."""

from __future__ import annotations

from pathlib import PurePath


def sudo_note(sudo_user: str, user_home: PurePath | None, root_home: PurePath | None, dest: PurePath) -> str | None:
    """The note for installing at `dest` as root on behalf of `sudo_user`, or None when none is due."""
    if user_home is not None and _under(dest, user_home):
        return (f"note: running as root through sudo (SUDO_USER={sudo_user}): {dest} will belong to root, and "
                f"{sudo_user} cannot update or remove it without sudo; run this without sudo")
    if root_home is not None and _under(dest, root_home):
        return (f"note: running as root through sudo (SUDO_USER={sudo_user}): {dest} is in root's home, where "
                f"{sudo_user}'s builds and `doctor check` do not look; run this without sudo, or give --dest a "
                f"folder {sudo_user} can read")
    return None


def _under(path: PurePath, folder: PurePath) -> bool:
    return path == folder or folder in path.parents
