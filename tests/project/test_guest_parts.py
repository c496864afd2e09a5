"""The guest is composed of parts, not inherited from them (issue 44): each part is
a class of its own, given the parts it reads in its constructor, so the state a part
writes is found in its module alone."""

from __future__ import annotations

import ast
import inspect

from wasm_kernel.runtime.checkpoints import Checkpoints
from wasm_kernel.runtime.child_python import ChildRunner
from wasm_kernel.runtime.engine_upgrade import EngineUpgrade
from wasm_kernel.runtime.guest_image import GuestImage
from wasm_kernel.runtime.guest_instance import GuestInstance
from wasm_kernel.runtime.guest_layout import GuestLayout
from wasm_kernel.runtime.guest_streams import GuestStreams
from wasm_kernel.runtime.guest_turns import TurnRunner
from wasm_kernel.runtime.hibernation import Hibernation
from wasm_kernel.runtime.host_door import HostDoor
from wasm_kernel.runtime.network_door import NetworkDoor
from wasm_kernel.runtime.python_guest import PythonGuest
from wasm_kernel.runtime.start_files import StartFiles
from wasm_kernel.runtime.turn_stops import TurnStops

PARTS = [GuestInstance, GuestLayout, GuestStreams, StartFiles, TurnStops, NetworkDoor, ChildRunner, HostDoor,
         Checkpoints, GuestImage, EngineUpgrade, Hibernation, TurnRunner]


def test_the_guest_inherits_from_none_of_its_parts() -> None:
    assert PythonGuest.__bases__ == (object,)
    for part in PARTS:
        assert part.__bases__ == (object,), f"{part.__name__} inherits {part.__bases__}"


def test_no_part_declares_another_parts_methods_as_stubs() -> None:
    # The mixins declared what they used of each other as class-level annotations
    # (`_require_store: Callable[[], Store]`); a part that needs another is given it.
    for part in PARTS:
        tree = ast.parse(inspect.getsource(part))
        body = tree.body[0]
        assert isinstance(body, ast.ClassDef)
        stubs = [node.target.id for node in body.body
                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                 and "Callable" in ast.unparse(node.annotation)]
        assert stubs == [], f"{part.__name__} declares {stubs}"


def test_each_part_is_made_once_by_the_guest() -> None:
    source = inspect.getsource(PythonGuest.__init__)
    for part in PARTS:
        assert source.count(f"{part.__name__}(") == 1, part.__name__
