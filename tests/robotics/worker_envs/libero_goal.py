"""A LIBERO-Long env that can put task 0's objects in its basket: the success path, for real.

Loaded in the LIBERO worker (this folder is put on its PYTHONPATH by the tests).
"""

from __future__ import annotations

import numpy as np

from wmrl_env.envs.libero.env import LiberoEnv


class GoalPlacingLiberoEnv(LiberoEnv):
    """LIBERO-Long task 0: "put both the alphabet soup and the tomato sauce in the basket"."""

    def place_goal_objects_in_basket(self) -> None:
        env = self._env.env
        sim = env.sim
        basket = env.objects_dict["basket_1"].root_body
        centre = np.array(sim.data.body_xpos[sim.model.body_name2id(basket)])
        for dx, name in [(-0.03, "alphabet_soup_1"), (0.03, "tomato_sauce_1")]:
            joint = env.objects_dict[name].joints[-1]
            start, _ = sim.model.get_joint_qpos_addr(joint)
            sim.data.qpos[start : start + 3] = centre + np.array([dx, 0.0, 0.08])
            low, high = sim.model.get_joint_qvel_addr(joint)
            sim.data.qvel[low:high] = 0.0
        sim.forward()
