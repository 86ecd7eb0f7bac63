#!/bin/bash
# The table_v1 build: held-out tasks and the 12 original train tasks first, then the rest of
# train, then wm; one resumable SQLite log. Re-running this script resumes where it stopped.
cd "$(dirname "$0")/.."
W="${PYTHON_BIN:-.venv/bin}/wmrl build-tables --workers 2 --log runs/table_v1.sqlite"
FIRST=$(${PYTHON_BIN:-.venv/bin}/python -c "
from wmrl_env.envs.ml_tasks import task_ids
from wmrl_env.envs.ml_tasks.curate import LEGACY_TASKS
print(' '.join(task_ids('heldout') + tuple(t for t in task_ids('train') if t in LEGACY_TASKS)))")
date -u +"%FT%TZ start heldout+legacy"; uptime
$W --tasks $FIRST || exit 1
date -u +"%FT%TZ start train"; uptime
$W --split train || exit 1
date -u +"%FT%TZ start wm"; uptime
$W --split wm || exit 1
date -u +"%FT%TZ done"; uptime
