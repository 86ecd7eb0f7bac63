"""Robotics benchmarks and the figures of docs/robotics.md.

    python benchmarks/bench_robotics.py horizon    # dynamics-model error vs horizon (Lift)
    python benchmarks/bench_robotics.py timing     # seconds per GRPO step, all-real vs WMRL
                                                   # (and per round: first vs steady, workers)
    python benchmarks/bench_robotics.py success    # the CPU example's success, all-real vs WMRL
    python benchmarks/bench_robotics.py worker     # one LIBERO worker: start-up, reset, step, RSS

Each writes a CSV and a PNG into ``docs/figures/`` (``--out`` to change). Timings are ratios
measured side by side in one run on one machine; see docs/benchmarks.md for the numbers.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def small_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(5.2, 3.3), dpi=90)


# ----------------------------------------------------------------- error vs horizon
def lift_episodes(episodes: int, steps: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Real Lift episodes with random actions held for 10 steps (smooth, like a policy)."""
    from wmrl_env.envs.robosuite import RobosuiteEnv

    env = RobosuiteEnv("Lift", horizon=steps)
    rng = np.random.default_rng(seed)
    out = []
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            states, actions, rewards = [obs], [], []
            for t in range(steps):
                if t % 10 == 0:
                    action = rng.uniform(-1, 1, 7).astype(np.float32)
                obs, reward, _, _, _ = env.step(action)
                states.append(obs)
                actions.append(action)
                rewards.append(reward)
            out.append(
                {"obs": np.array(states), "act": np.array(actions), "rew": np.array(rewards)}
            )
    finally:
        env.close()
    return out


def horizon_benchmark(args: argparse.Namespace) -> None:
    from wmrl_env.world_models.dynamics.ensemble import EnsembleConfig, EnsembleDynamicsModel

    started = time.perf_counter()
    episodes = lift_episodes(args.episodes + args.held_out, args.steps, seed=0)
    train, held_out = episodes[: args.episodes], episodes[args.episodes :]
    collect_seconds = time.perf_counter() - started

    def transitions(eps):
        return (
            np.concatenate([e["obs"][:-1] for e in eps]),
            np.concatenate([e["act"] for e in eps]),
            np.concatenate([e["obs"][1:] for e in eps]),
            np.concatenate([e["rew"] for e in eps]),
            np.zeros(sum(len(e["act"]) for e in eps), dtype=bool),
        )

    obs, act, nxt, rew, term = transitions(train)
    model = EnsembleDynamicsModel(
        obs.shape[1], act.shape[1], EnsembleConfig(ensemble_size=5, hidden_sizes=(200, 200))
    )
    report = model.fit(obs, act, nxt, rew, term)
    scale = obs.std(axis=0)
    scale = np.where(scale < 1e-6, 1.0, scale)  # per-dimension units: the state's own spread
    horizons = list(range(1, args.horizon + 1))
    model_errors = {h: [] for h in horizons}
    still_errors = {h: [] for h in horizons}
    for episode in held_out:
        starts = np.arange(0, args.steps - args.horizon, 5)
        plans = np.stack([episode["act"][s : s + args.horizon] for s in starts])
        imagined = model.imagine(episode["obs"][starts], plans)
        for h in horizons:
            truth = episode["obs"][starts + h]
            model_errors[h].append(((imagined.observations[:, h] - truth) / scale) ** 2)
            still_errors[h].append(((episode["obs"][starts] - truth) / scale) ** 2)
    rows = [
        {
            "horizon": h,
            "model_nmse": float(np.mean(np.concatenate(model_errors[h]))),
            "no_change_nmse": float(np.mean(np.concatenate(still_errors[h]))),
        }
        for h in horizons
    ]
    write_csv(args.out / "dynamics_horizon.csv", rows)
    fig, ax = small_figure()
    ax.plot(horizons, [r["model_nmse"] for r in rows], "o-", label="ensemble (open loop)")
    ax.plot(horizons, [r["no_change_nmse"] for r in rows], "s--", label="'nothing moves'")
    ax.set_xlabel("prediction horizon (steps, 20 Hz)")
    ax.set_ylabel("normalised MSE (held-out)")
    ax.set_yscale("log")
    ax.set_title(f"Lift state, {len(obs)} training transitions", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "dynamics_horizon.png")
    print(
        f"collected {len(obs)} transitions in {collect_seconds:.1f}s; fit {report}; "
        f"h=1 {rows[0]}; h={horizons[-1]} {rows[-1]}"
    )


# ----------------------------------------------------------------- seconds per GRPO step
class ZeroImageWorldModel(torch.nn.Module):
    """Stand-in for a user's image world model (a 3x3 conv over the frames, zero reward)."""

    def __init__(self, state_dim: int, size: int) -> None:
        super().__init__()
        self.state_dim, self.size = state_dim, size
        self.conv = torch.nn.Conv2d(6, 6, 3, padding=1)

    def forward(self, observations, actions):
        n, size = len(observations), self.size
        images = observations[:, : 2 * size * size * 3].reshape(n, 2 * 3, size, size)
        frames = images + 0.0 * self.conv(images / 255.0)
        nxt = torch.cat([frames.reshape(n, -1), observations[:, 2 * size * size * 3 :]], dim=1)
        return nxt, torch.zeros(n)


class FlatCameraObservations(gym.wrappers.FlattenObservation):
    """Flat camera observations for the vector env, with snapshots that flatten too.

    (Reaching ``restore_snapshot`` through ``get_wrapper_attr`` would skip this wrapper's
    observation transform, so the wrapper offers the two methods itself.)
    """

    def get_snapshot(self) -> Any:
        return self.env.get_wrapper_attr("get_snapshot")()

    def restore_snapshot(self, snapshot: Any) -> tuple[np.ndarray, dict]:
        observation, info = self.env.get_wrapper_attr("restore_snapshot")(snapshot)
        return self.observation(observation), info


def timing_setups(args: argparse.Namespace) -> dict[str, Any]:
    from wmrl_env.envs.libero import make_libero_env
    from wmrl_env.envs.robosuite import RobosuiteEnv
    from wmrl_env.integrations.vla import ActionChunking
    from wmrl_env.world_models.dynamics.ensemble import (
        EnsembleConfig,
        EnsembleDynamicsModel,
        TorchDynamicsAdapter,
    )

    chunk, steps = args.chunk_size, args.episode_chunks * args.chunk_size

    def lift():
        return ActionChunking(RobosuiteEnv("Lift", horizon=steps, reward_shaping=False), chunk)

    def libero_camera():
        env = make_libero_env(
            suite="libero_10", task_id=0, horizon=steps, observation_mode="camera", camera_size=128
        )
        return ActionChunking(FlatCameraObservations(env), chunk)

    lift_model = EnsembleDynamicsModel(60, chunk * 7, EnsembleConfig(ensemble_size=5, seed=0))
    rng = np.random.default_rng(0)
    fake = rng.normal(size=(64, 60))
    lift_model.fit(fake, rng.uniform(-1, 1, (64, chunk * 7)), fake, np.zeros(64), np.zeros(64))

    def libero_state():
        env = make_libero_env(suite="libero_10", task_id=0, horizon=steps)
        return ActionChunking(env, chunk)

    libero_model = TorchDynamicsAdapter(ZeroImageWorldModel(151, 128))
    state_model = EnsembleDynamicsModel(151, chunk * 7, EnsembleConfig(ensemble_size=5, seed=0))
    fake = rng.normal(size=(64, 151))
    state_model.fit(fake, rng.uniform(-1, 1, (64, chunk * 7)), fake, np.zeros(64), np.zeros(64))
    return {
        "robosuite Lift (state)": (lift, lift_model),
        "LIBERO-Long 128px cameras": (libero_camera, libero_model),
        "LIBERO-Long state": (libero_state, state_model),
    }


def live_workers() -> list[Any]:
    """This process's env worker processes (``SubprocessEnv`` children), as psutil processes."""
    import psutil

    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "wmrl_env.envs.remote.worker" in " ".join(child.cmdline())
    ]


def timing_benchmark(args: argparse.Namespace) -> None:
    from wmrl_env.env_executors import GymEnvExecutor
    from wmrl_env.fusion import RewardFusion
    from wmrl_env.wrappers import WorldModelVectorEnv

    rows, round_rows = [], []
    for name, (env_fn, model) in timing_setups(args).items():
        if args.only and args.only not in name:
            continue
        for method in args.methods.split(","):
            envs = WorldModelVectorEnv(
                env_fn,
                model,
                num_groups=args.num_groups,
                group_size=args.group_size,
                fusion=RewardFusion(method=method, anchor_fraction=args.anchor_fraction, seed=0),
                executor=GymEnvExecutor(
                    env_fn, "thread", num_workers=args.workers, max_envs=args.max_envs
                ),
                task="dynamics",
                max_episode_steps=args.episode_chunks,
            )
            try:
                rng = np.random.default_rng(0)
                seconds = []
                for round_index in range(args.rounds + 1):  # the first round starts the envs
                    started = time.perf_counter()
                    envs.reset(seed=round_index)
                    done = np.zeros(envs.num_envs, dtype=bool)
                    while not done.all():
                        actions = rng.uniform(-1, 1, envs.action_space.shape).astype(np.float32)
                        _, _, terminated, truncated, info = envs.step(actions)
                        done = terminated | truncated
                    elapsed = time.perf_counter() - started
                    if round_index:
                        seconds.append(elapsed)
                    workers = live_workers()
                    rss = [w.memory_info().rss / 2**30 for w in workers]
                    round_rows.append(
                        {
                            "setup": name,
                            "method": method,
                            "round": round_index,
                            "seconds": elapsed,
                            "real_trajectories": int(np.asarray(info["is_anchor"]).sum()),
                            "live_workers": len(workers),
                            "worker_pids": " ".join(str(w.pid) for w in workers),
                            "worker_rss_gib_mean": float(np.mean(rss)) if rss else 0.0,
                        }
                    )
                    print(round_rows[-1], flush=True)
                anchors = int(np.asarray(info["is_anchor"]).sum())
            finally:
                envs.close()
            row = {
                "setup": name,
                "method": method,
                "seconds_per_grpo_step": float(np.mean(seconds)),
                "real_trajectories": anchors,
                "trajectories": envs.num_envs,
            }
            print(row, flush=True)
            rows.append(row)
    write_csv(args.out / "grpo_round_seconds.csv", round_rows)
    write_csv(args.out / "grpo_step_seconds.csv", rows)
    plot_timing(args.out)


def plot_timing(out: Path) -> None:
    """One panel per setup (their scales differ by 30x), from ``grpo_step_seconds.csv``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(out / "grpo_step_seconds.csv") as stream:
        rows = list(csv.DictReader(stream))
    methods = {setup: {r["method"] for r in rows if r["setup"] == setup} for setup in
               dict.fromkeys(r["setup"] for r in rows)}  # fmt: skip
    setups = [setup for setup, have in methods.items() if {"real", "wmrl"} <= have]
    if not setups:
        return
    fig, axes = plt.subplots(1, len(setups), figsize=(5.6, 3.0), dpi=90, squeeze=False)
    for ax, setup in zip(axes[0], setups, strict=True):
        mine = {r["method"]: r for r in rows if r["setup"] == setup}
        values = [float(mine[m]["seconds_per_grpo_step"]) for m in ("real", "wmrl")]
        labels = [f"all real\n{mine['real']['real_trajectories']} real", f"WMRL\n"
                  f"{mine['wmrl']['real_trajectories']} real"]  # fmt: skip
        bars = ax.bar(labels, values, color=["tab:blue", "tab:orange"])
        ax.bar_label(bars, fmt="%.1f s", fontsize=8)
        ax.set_title(setup, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.set_ylim(0, max(values) * 1.2)
    axes[0][0].set_ylabel("seconds per GRPO step")
    fig.tight_layout()
    fig.savefig(out / "grpo_step_seconds.png")


# ----------------------------------------------------------------- success over training
def success_benchmark(args: argparse.Namespace) -> None:
    spec = importlib.util.spec_from_file_location(
        "vla_example", ROOT / "examples" / "vla_libero_grpo.py"
    )
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example
    spec.loader.exec_module(example)
    rows = []
    for method in ("real", "wmrl"):
        argv = [
            "--env", args.env, "--method", method, "--iterations", str(args.iterations),
            "--num-groups", str(args.num_groups), "--group-size", str(args.group_size),
            "--episode-chunks", str(args.episode_chunks), "--chunk-size", str(args.chunk_size),
            "--eval-every", str(args.eval_every), "--eval-episodes", str(args.eval_episodes),
            "--anchor-fraction", str(args.anchor_fraction),
        ]  # fmt: skip
        elapsed = 0.0
        for row in example.main(argv):
            elapsed += row["round_seconds"]
            rows.append({"method": method, "elapsed_seconds": elapsed, **row})
    write_csv(args.out / "example_success.csv", rows)
    fig, ax = small_figure()
    for method, marker in (("real", "o-"), ("wmrl", "s-")):
        mine = [r for r in rows if r["method"] == method and "eval_success" in r]
        label = "all real" if method == "real" else "WMRL"
        ax.plot(
            [r["iteration"] + 1 for r in mine],
            [r["eval_success"] for r in mine],
            marker,
            label=label,
        )
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("real success rate (evaluation)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"CPU example, {args.env}: state-MLP policy", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "example_success.png")


# ----------------------------------------------------------------- one LIBERO worker's costs
def worker_benchmark(args: argparse.Namespace) -> None:
    """What one LIBERO-Long worker costs: start-up, reset, snapshot, restore, step, memory."""
    import psutil

    from wmrl_env.envs.libero import make_libero_env

    rng = np.random.default_rng(0)
    rows = []
    for mode in args.modes.split(","):
        started = time.perf_counter()
        env = make_libero_env(suite="libero_10", task_id=0, horizon=10_000, observation_mode=mode)
        start_up = time.perf_counter() - started
        try:
            timed: dict[str, list[float]] = {"reset": [], "snapshot": [], "restore": []}
            for episode in range(args.repeats):
                ticks = [time.perf_counter()]
                env.reset(seed=episode)
                ticks.append(time.perf_counter())
                snapshot = env.get_snapshot()
                ticks.append(time.perf_counter())
                env.restore_snapshot(snapshot)
                ticks.append(time.perf_counter())
                for name, seconds in zip(timed, np.diff(ticks), strict=True):
                    timed[name].append(float(seconds))
            actions = rng.uniform(-1, 1, (args.steps, 7)).astype(np.float32)
            started = time.perf_counter()
            for action in actions:
                env.step(action)
            step = (time.perf_counter() - started) / args.steps
            rss = psutil.Process(env.pid).memory_info().rss / 2**30
        finally:
            env.close()
        row = {
            "observation_mode": mode,
            "start_up_seconds": start_up,
            **{f"{k}_seconds": float(np.median(v)) for k, v in timed.items()},
            "step_seconds": step,
            "steps_per_second": 1 / step,
            "worker_rss_gib": rss,
        }
        print(row, flush=True)
        rows.append(row)
    write_csv(args.out / "libero_worker_costs.csv", rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("which", choices=["horizon", "timing", "timing-plot", "success", "worker"])
    parser.add_argument("--out", type=Path, default=FIGURES)
    parser.add_argument("--episodes", type=int, default=24, help="horizon: training episodes")
    parser.add_argument("--held-out", type=int, default=4, help="horizon: held-out episodes")
    parser.add_argument("--steps", type=int, default=60, help="horizon/worker: steps timed")
    parser.add_argument("--horizon", type=int, default=20, help="horizon: longest horizon")
    parser.add_argument("--env", default="libero", help="success: 'libero' or 'lift'")
    parser.add_argument("--iterations", type=int, default=8, help="success: GRPO steps")
    parser.add_argument("--eval-every", type=int, default=2)
    parser.add_argument("--eval-episodes", type=int, default=4)
    parser.add_argument("--num-groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--anchor-fraction", type=float, default=0.25)
    parser.add_argument("--chunk-size", type=int, default=8)
    parser.add_argument("--episode-chunks", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="timing: measured rounds")
    parser.add_argument("--workers", type=int, default=4, help="timing: real-env threads")
    parser.add_argument("--only", default="", help="timing: run only setups containing this")
    parser.add_argument("--methods", default="real,wmrl", help="timing: comma-separated")
    parser.add_argument("--max-envs", type=int, default=None, help="timing: live real envs")
    parser.add_argument("--modes", default="state,camera", help="worker: observation modes")
    parser.add_argument("--repeats", type=int, default=5, help="worker: resets timed")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # small models; threads only contend on a 2-core machine
    commands = {
        "horizon": horizon_benchmark,
        "timing": timing_benchmark,
        "timing-plot": lambda a: plot_timing(a.out),
        "success": success_benchmark,
        "worker": worker_benchmark,
    }
    commands[args.which](args)


if __name__ == "__main__":
    main()
