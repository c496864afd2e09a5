"""Where a guest's folders appear inside it: the preopened mounts in descriptor order
(3, 4, ...): the library, matplotlib's data, support code, the staged site, the
course's environment when there is one (course_mount.py) and the %pip packages; then /dev (guest_devices.py), /tmp, /app and the notebook's folder, and the sys.path they give.
Every store a guest makes gets the same table, so descriptors a checkpoint holds stay
valid; every shell guest on the staged site gets the same one, so one warm image
(whose libc holds that table) serves all.
PythonGuest inherits it; the state it reads is the guest's, declared below."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..host.artifacts import GUEST_LIB, runtime_tree
from ..host.guest_site import guest_packages_path
from .guest_devices import GUEST_DEV
from .guest_config import GUEST_APP, GUEST_LIB_DIR, GUEST_NOTEBOOK, GUEST_SUPPORT, GUEST_TMP, GuestOptions, SiteMount


class GuestLayout:
    """The layout side of a guest. The guest sets these as it starts."""

    workspace: Path
    options: GuestOptions
    _shell: bool
    _site: SiteMount | None
    _course: SiteMount | None  # the course's environment (course_mount.py), shell guests only
    _private: Path | None  # the guest's own folder on the host (/tmp, stdin, packages)
    _tmp_folder: Callable[[], Path]  # its /tmp on the host (a child's is its parent's)

    def _uniform_layout(self) -> bool:
        """A shell guest on the staged site: the layout every such guest shares, the
        one a warm image is made for."""
        return self._shell and self._site is not None and self._site.key is not None

    def _mounts(self) -> list[tuple[str, bool]]:
        """Guest paths of the preopens before /tmp and /app, in fd order, and whether writable."""
        packages = self._uniform_layout() or self.options.packages is not None
        return guest_mounts(self._site, packages, self._course)

    @property
    def dev_fd(self) -> int:
        """The /dev preopen's descriptor (guest_devices.py)."""
        return 3 + len(self._mounts())

    def _python_path(self) -> list[str]:
        return [guest for guest, _ in self._mounts()[2:]]

    def _preopens(self) -> list[tuple[Path, str, bool]]:
        """(host folder, guest path, writable) in fd order: 3, 4, ... (see _mounts)."""
        assert self._private is not None
        tree = runtime_tree()
        hosts = [tree.lib_dir, tree.mpl_data_dir, GUEST_LIB_DIR]
        if self._site is not None:
            hosts.append(self._site.host)
        if self._course is not None:
            hosts.append(self._course.host)
        if self._uniform_layout() or self.options.packages is not None:
            hosts.append(self.options.packages or self._private / "packages")
        preopens = [(host, guest, writable) for host, (guest, writable) in zip(hosts, self._mounts())]
        preopens += [(self._private / "dev", GUEST_DEV, False), (self._tmp_folder(), GUEST_TMP, True),
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
