"""Where a guest's folders appear inside it: the preopened mounts in descriptor order
(3, 4, ...): the library, matplotlib's data, support code, the staged site, the
course's environment when there is one (course_mount.py) and the %pip packages; then /dev (guest_devices.py), /tmp, /app and the notebook's folder, and the sys.path they give.
Every store a guest makes gets the same table, so descriptors a checkpoint holds stay
valid; every shell guest on the staged site gets the same one, so one warm image
(whose libc holds that table) serves all.
A guest holds one GuestLayout; its private folder is set at each start."""

from __future__ import annotations

from pathlib import Path

from ..host.artifacts import GUEST_LIB, runtime_tree
from ..host.guest_site import guest_packages_path
from .guest_devices import GUEST_DEV
from .guest_config import GUEST_APP, GUEST_LIB_DIR, GUEST_NOTEBOOK, GUEST_SUPPORT, GUEST_TMP, GuestOptions, SiteMount


class GuestLayout:
    """The folders one guest sees, and the host folders behind them."""

    def __init__(self, workspace: Path, options: GuestOptions, *, shell: bool, site: SiteMount | None,
                 course: SiteMount | None, shared_tmp: Path | None = None) -> None:
        """course: the course's environment (course_mount.py), shell guests only.
        shared_tmp: the host folder of this guest's /tmp when it is not its own (a
        `python` child uses its parent's)."""
        self.workspace = workspace
        self.options = options
        self.shell = shell
        self.site = site
        self.course = course
        self.shared_tmp = shared_tmp
        self.private: Path | None = None  # the guest's own folder on the host (/tmp, stdin, packages), per start

    def tmp_folder(self) -> Path:
        """The host folder that is this guest's /tmp (a child's is its parent's)."""
        if self.shared_tmp is not None:
            return self.shared_tmp
        assert self.private is not None
        return self.private / "tmp"

    def uniform(self) -> bool:
        """A shell guest on the staged site: the layout every such guest shares, the
        one a warm image is made for."""
        return self.shell and self.site is not None and self.site.key is not None

    def mounts(self) -> list[tuple[str, bool]]:
        """Guest paths of the preopens before /tmp and /app, in fd order, and whether writable."""
        packages = self.uniform() or self.options.packages is not None
        return guest_mounts(self.site, packages, self.course)

    @property
    def dev_fd(self) -> int:
        """The /dev preopen's descriptor (guest_devices.py)."""
        return 3 + len(self.mounts())

    def python_path(self) -> list[str]:
        return [guest for guest, _ in self.mounts()[2:]]

    def preopens(self) -> list[tuple[Path, str, bool]]:
        """(host folder, guest path, writable) in fd order: 3, 4, ... (see mounts)."""
        assert self.private is not None
        tree = runtime_tree()
        hosts = [tree.lib_dir, tree.mpl_data_dir, GUEST_LIB_DIR]
        if self.site is not None:
            hosts.append(self.site.host)
        if self.course is not None:
            hosts.append(self.course.host)
        if self.uniform() or self.options.packages is not None:
            hosts.append(self.options.packages or self.private / "packages")
        preopens = [(host, guest, writable) for host, (guest, writable) in zip(hosts, self.mounts())]
        preopens += [(self.private / "dev", GUEST_DEV, False), (self.tmp_folder(), GUEST_TMP, True),
                     (self.workspace, GUEST_APP, True)]
        if self.options.notebook is not None:
            preopens.append((self.options.notebook.path, GUEST_NOTEBOOK, False))  # the last one, so libc skips it
        return preopens


def guest_mounts(site: SiteMount | None, packages: bool, course: SiteMount | None = None) -> list[tuple[str, bool]]:
    """The guest paths of the preopens before /tmp and /app, in fd order from 3, and
    whether each is writable. Part of the warm image's key (provisioning): an image
    holds the preopens' table, so it fits only the same mounts."""
    tree = runtime_tree()
    mounts = [(GUEST_LIB, False), (tree.mpl_data_guest_path, False), (GUEST_SUPPORT, False)]
    if site is not None:
        mounts.append((site.guest_path, site.writable))
    if course is not None:
        mounts.append((course.guest_path, False))
    if packages:
        mounts.append((guest_packages_path(), False))
    return mounts


__all__ = ["GuestLayout", "guest_mounts"]
