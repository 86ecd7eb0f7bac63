"""A fingerprint of the robosuite code that :class:`~.fast_control.FastControl` reproduces.

The fast step replays robosuite's control step (``MujocoEnv.step``, ``FixedBaseRobot.control``,
the OSC and gripper controllers, the observables' clocks) in its own code; it is the same
floats only while the installed robosuite is the code it was proven against (robosuite 1.5.2).
:func:`fingerprint` hashes the source of each function it mirrors, as the installed classes
resolve it (a patched or overridden method has other source), and :func:`mismatch` names the
first one that differs from :data:`PROVEN`.

After changing the fast step for another robosuite and proving it bit-identical again
(``tests/robotics/test_fast_control.py``), print the new table with::

    python -m wmrl_env.envs.robosuite.proven_code
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["PROVEN", "fingerprint", "mirrored_functions", "mismatch"]

#: the sha256 (first 16 hex digits) of each mirrored function's source in robosuite 1.5.2
PROVEN: dict[str, str] = {
    "MujocoEnv.step": "b32efd800fc6331c",
    "MujocoEnv._update_observables": "20faacb48a3255e2",
    "RobotEnv._pre_action": "ea00772eeb69d6be",
    "MjSim.step1": "5ee60a12d8eb2403",
    "MjSim.step2": "90c88946e27b2aa2",
    "MjData.get_site_jacp": "0d97fe7a4298b9c8",
    "MjData.get_site_jacr": "61b12810d1fee609",
    "MjData.get_site_xvelp": "370f7d70a4d64506",
    "MjData.get_site_xvelr": "fa2d53f5c2745ace",
    "Observable.update": "c4bf0658c7e87b7b",
    "FixedBaseRobot.control": "53fd661fe45fa0e7",
    "CompositeController.update_state": "962ffdf11570b067",
    "CompositeController.get_controller_base_pose": "fe80556c760463a6",
    "CompositeController.run_controller": "4f392ada85fe1d6b",
    "OperationalSpaceController.update": "1d667c1efb740797",
    "OperationalSpaceController.update_reference_data": "9f73ede39e4dcd72",
    "OperationalSpaceController._update_single_reference": "25388105b44b0406",
    "OperationalSpaceController.update_origin": "941dd16478e2cec6",
    "OperationalSpaceController.set_goal": "0fd135caf4ed70f1",
    "OperationalSpaceController.run_controller": "44859dc62f34faf8",
    "SimpleGripController.update": "13db3d3cea060dca",
    "SimpleGripController.set_goal": "a4c2119ad3fda7f0",
    "SimpleGripController.run_controller": "627e9dd74c7f4663",
    "control_utils.opspace_matrices": "10ca13647120368f",
    "control_utils.nullspace_torques": "1c9af0f3f59e670f",
    "control_utils.orientation_error": "c02227360d9d262c",
}


def mirrored_functions() -> dict[str, Callable[..., Any]]:
    """The installed functions behind :data:`PROVEN`'s names, each resolved on the class the
    fast step covers (so a subclass's or a patch's override is the one hashed)."""
    from robosuite.controllers.composite.composite_controller import CompositeController
    from robosuite.controllers.parts.arm.osc import OperationalSpaceController
    from robosuite.controllers.parts.gripper.simple_grip import SimpleGripController
    from robosuite.environments.base import MujocoEnv
    from robosuite.environments.robot_env import RobotEnv
    from robosuite.robots.fixed_base_robot import FixedBaseRobot
    from robosuite.utils import control_utils
    from robosuite.utils.binding_utils import MjData, MjSim
    from robosuite.utils.observables import Observable

    owners = {
        "MujocoEnv": MujocoEnv,
        "RobotEnv": RobotEnv,
        "MjSim": MjSim,
        "MjData": MjData,
        "Observable": Observable,
        "FixedBaseRobot": FixedBaseRobot,
        "CompositeController": CompositeController,
        "OperationalSpaceController": OperationalSpaceController,
        "SimpleGripController": SimpleGripController,
        "control_utils": control_utils,
    }
    functions = {}
    for name in PROVEN:
        owner, attribute = name.split(".")
        function = getattr(owners[owner], attribute, None)
        functions[name] = getattr(function, "py_func", function)  # numba's: its Python source
    return functions


@functools.lru_cache(maxsize=256)  # by function object: a patch is another object
def _digest(function: Callable[..., Any] | None) -> str:
    """The first 16 hex digits of the sha256 of ``function``'s source; ``"missing"`` or
    ``"no source"`` where there is none to read."""
    if function is None:
        return "missing"
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return "no source"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def fingerprint() -> dict[str, str]:
    """The digest of each mirrored function as installed (see :data:`PROVEN`)."""
    return {name: _digest(function) for name, function in mirrored_functions().items()}


def mismatch(proven: dict[str, str] | None = None) -> str | None:
    """Why the installed robosuite is not the code the fast step was proven against (the
    functions whose source differs), or ``None`` where every one matches ``proven``
    (default :data:`PROVEN`)."""
    import robosuite

    proven = PROVEN if proven is None else proven
    found = fingerprint()
    differ = [name for name in proven if found.get(name) != proven[name]]
    if not differ:
        return None
    return (
        f"robosuite {robosuite.__version__}'s {', '.join(differ)} differ from the code the fast "
        "step reproduces (robosuite 1.5.2)"
    )


if __name__ == "__main__":
    for _name, _digest_now in fingerprint().items():
        print(f'    "{_name}": "{_digest_now}",')
