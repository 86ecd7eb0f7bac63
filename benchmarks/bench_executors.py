"""Executor benchmarks: per-job overhead and batch throughput of each sandbox backend.

    python benchmarks/bench_executors.py overhead   [--backends local,docker,ray] [--repeats 20]
    python benchmarks/bench_executors.py throughput [--backends local,docker,ray] [--jobs 64]
    python benchmarks/bench_executors.py warm       [--backends local,local-warm] [--repeats 20]
    python benchmarks/bench_executors.py covers     [--repeats 20]

Backends: ``local``, ``local-warm``, ``docker``, ``docker-warm`` (``DockerSandbox(warm=True)``)
and ``ray``.

``overhead``: a trivial job (``pass``) run alone, start (``submit``) to result, ``repeats``
times after one warm-up; next to it, the bare cost of starting the same Python without any
sandbox (a plain subprocess; ``docker exec`` into a running container for Docker), so the
difference is what the sandbox adds, and a plain ``python -c pass`` on the host, measured in
the same run (``ratio_to_host_python``: the sandboxed job's time over it).

``throughput``: ``jobs`` short ML jobs (numpy + scikit-learn: fit a logistic regression on
400 synthetic rows, write the accuracy to score.json) submitted at once to a backend using
all CPUs, against the ideal ``jobs * t1 / cpus``, where ``t1`` is the median time of one such
job run alone without any sandbox. Ray runs on a local instance with ``num_cpus`` = CPUs.

``warm``: the job overhead of a trivial job and of the ML job above, cold (``local``) and on
the warm pool (``local-warm``), in one run. A job's overhead is its start-to-result time
minus the time of the work itself: for the trivial job a bare ``python main.py`` start (as in
``overhead``), for the ML job the program alone, run in a Python that has already imported
numpy and scikit-learn (the import is part of the overhead a warm pool removes).

``covers``: what covering the packages' dataset files costs a cold local job: trivial jobs
with all covers, only the directories, only the files, or none, interleaved in one run.

All print a Markdown table and write JSON under ``--out``. Report the machine's load with
the figures: on a shared machine they move with it.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wmrl_env.sandboxes import DockerSandbox, Job, JsonScore, LocalSandbox, RayExecutor

TRIVIAL = "pass\n"
ML_JOB = """
import json
import numpy as np
from sklearn.linear_model import LogisticRegression
rng = np.random.default_rng(SEED)
x = rng.normal(size=(400, 8))
y = (x @ rng.normal(size=8) + rng.normal(size=400) > 0).astype(int)
model = LogisticRegression().fit(x[:300], y[:300])
json.dump({"score": float(model.score(x[300:], y[300:]))}, open("score.json", "w"))
"""
SCORE = JsonScore("score.json")


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def make(backend: str, timeout_s: float):
    limits = {"timeout_s": timeout_s, "memory_mb": 1024}
    if backend == "local":
        return LocalSandbox(**limits)
    if backend == "local-warm":
        return LocalSandbox(**limits, warm=True)
    if backend == "docker":
        return DockerSandbox(**limits)
    if backend == "docker-warm":
        return DockerSandbox(**limits, warm=True)
    if backend == "ray":
        import ray

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not ray.is_initialized():
            temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
            ray.init(num_cpus=cpus(), include_dashboard=False, _temp_dir=temp)
            atexit.register(shut_down_ray, ray, temp)
        return RayExecutor(inner="local", inner_kwargs=limits)
    raise ValueError(f"unknown backend {backend!r}")


def shut_down_ray(ray, temp_dir: str) -> None:
    ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def ml_job(seed: int) -> Job:
    return Job(ML_JOB.replace("SEED", str(seed)), output_files=SCORE.files, scorer=SCORE)


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def bare_seconds(backend: str, program: str, repeats: int) -> list[float]:
    """The same program started without a sandbox, ``repeats`` times."""
    with tempfile.TemporaryDirectory() as workdir:
        Path(workdir, "main.py").write_text(program)
        if not backend.startswith("docker"):
            command = [sys.executable, "main.py"]
            return [
                timed(lambda: subprocess.run(command, cwd=workdir, check=True))
                for _ in range(repeats)
            ]
        from wmrl_env.sandboxes.docker_sandbox import connect
        from wmrl_env.sandboxes.image import default_image

        client = connect()
        container = client.containers.run(
            default_image(),
            ["sleep", "600"],
            detach=True,
            network_mode="none",
            volumes={workdir: {"bind": "/job", "mode": "rw"}},
            working_dir="/job",
        )
        try:
            return [
                timed(lambda: container.exec_run(["python3", "main.py"])) for _ in range(repeats)
            ]
        finally:
            container.remove(force=True)


def run_one(executor, job: Job) -> float:
    start = time.perf_counter()
    [result] = executor.run([job])
    seconds = time.perf_counter() - start
    if not result.ok:
        raise RuntimeError(f"benchmark job failed: {result.status}: {result.message}")
    return seconds


def overhead(backend: str, repeats: int) -> dict:
    with make(backend, timeout_s=60) as executor:
        run_one(executor, Job(TRIVIAL))  # warm-up: probes, worker start, image cache
        sandboxed = [run_one(executor, Job(TRIVIAL)) for _ in range(repeats)]
    bare = bare_seconds(backend, TRIVIAL, repeats)
    host = [
        timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
        for _ in range(repeats)
    ]
    return {
        "backend": backend,
        "repeats": repeats,
        "sandboxed_median_s": statistics.median(sandboxed),
        "sandboxed_p90_s": sorted(sandboxed)[int(0.9 * (repeats - 1))],
        "bare_python_median_s": statistics.median(bare),
        "overhead_median_s": statistics.median(sandboxed) - statistics.median(bare),
        "host_python_c_pass_s": statistics.median(host),
        "ratio_to_host_python": statistics.median(sandboxed) / statistics.median(host),
    }


def compute_seconds(program: str, repeats: int) -> list[float]:
    """``program`` run ``repeats`` times in one Python that imported its libraries first."""
    timer = (
        "import json, sys, time, os\n"
        "import numpy, sklearn.linear_model\n"
        "source = sys.stdin.read()\n"
        "seconds = []\n"
        f"for _ in range({repeats}):\n"
        "    start = time.perf_counter()\n"
        "    exec(compile(source, 'main.py', 'exec'), {'__name__': '__main__'})\n"
        "    seconds.append(time.perf_counter() - start)\n"
        "print(json.dumps(seconds))\n"
    )
    with tempfile.TemporaryDirectory() as workdir:
        out = subprocess.run(
            [sys.executable, "-c", timer],
            input=program,
            cwd=workdir,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return json.loads(out)


def warm_overhead(backend: str, repeats: int) -> dict:
    """Overhead of a trivial job and of an ML job on ``backend`` (``local``/``local-warm``)."""
    ml_program = ML_JOB.replace("SEED", "0")
    with make(backend, timeout_s=120) as executor:
        run_one(executor, ml_job(0))  # warm-up: probes, the warm servers' imports
        trivial = [run_one(executor, Job(TRIVIAL)) for _ in range(repeats)]
        ml = [run_one(executor, ml_job(0)) for _ in range(repeats)]
    bare = statistics.median(bare_seconds("local", TRIVIAL, repeats))
    compute = statistics.median(compute_seconds(ml_program, repeats))
    return {
        "backend": backend,
        "repeats": repeats,
        "trivial_median_s": statistics.median(trivial),
        "trivial_overhead_s": statistics.median(trivial) - bare,
        "ml_median_s": statistics.median(ml),
        "ml_p90_s": sorted(ml)[int(0.9 * (repeats - 1))],
        "ml_compute_s": compute,
        "ml_overhead_s": statistics.median(ml) - compute,
    }


def covers_cost(repeats: int) -> dict:
    """Median trivial cold job with each subset of the dataset covers (interleaved)."""
    from wmrl_env.sandboxes import isolation

    every = isolation.hidden_data_paths(sys.executable)
    directories = tuple(p for p in every if os.path.isdir(p))
    subsets = {
        "all": every,
        "directories": directories,
        "files": tuple(p for p in every if p not in directories),
        "none": (),
    }
    seconds: dict[str, list[float]] = {name: [] for name in subsets}
    real = isolation.hidden_data_paths
    try:
        with make("local", timeout_s=60) as executor:
            run_one(executor, Job(TRIVIAL))
            for _ in range(repeats):
                for name, paths in subsets.items():
                    isolation.hidden_data_paths = lambda executable, paths=paths: paths
                    seconds[name].append(run_one(executor, Job(TRIVIAL)))
    finally:
        isolation.hidden_data_paths = real
    row: dict = {"covers": len(every), "directories": len(directories), "repeats": repeats}
    row.update({f"{name}_median_s": statistics.median(v) for name, v in seconds.items()})
    return row


def throughput(backend: str, jobs: int) -> dict:
    t1 = statistics.median(bare_seconds("local", ML_JOB.replace("SEED", "0"), 5))
    with make(backend, timeout_s=300) as executor:
        run_one(executor, ml_job(0))  # warm-up
        single = statistics.median(run_one(executor, ml_job(i)) for i in range(3))
        start = time.perf_counter()
        results = executor.run([ml_job(i) for i in range(jobs)])
        batch = time.perf_counter() - start
    failed = [r for r in results if not r.ok]
    ideal = jobs * t1 / cpus()
    return {
        "backend": backend,
        "jobs": jobs,
        "cpus": cpus(),
        "failed": len(failed),
        "bare_job_median_s": t1,
        "sandboxed_job_median_s": single,
        "batch_s": batch,
        "ideal_batch_s": ideal,
        "efficiency_vs_bare_ideal": ideal / batch,
        "scaling_vs_own_single_job": jobs * single / cpus() / batch,
    }


def markdown(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["overhead", "throughput", "warm", "covers"])
    parser.add_argument("--backends", default="local,docker,ray")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--out", default="runs/bench_executors")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []
    for backend in args.backends.split(",") if args.what != "covers" else ["local"]:
        if args.what == "overhead":
            rows.append(overhead(backend, args.repeats))
        elif args.what == "warm":
            rows.append(warm_overhead(backend, args.repeats))
        elif args.what == "covers":
            rows.append(covers_cost(args.repeats))
        else:
            rows.append(throughput(backend, args.jobs))
        print(markdown(rows[-1:]), flush=True)
    conditions = {
        "machine": f"{platform.node()} {platform.machine()}, {cpus()} CPUs",
        "python": platform.python_version(),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    print(markdown(rows))
    print(json.dumps(conditions))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.what}.json").write_text(json.dumps({"rows": rows, **conditions}, indent=2))


if __name__ == "__main__":
    main()
