"""Properties that must hold for any batch (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from wmrl_env.fusion import METHODS, OnlineCalibrator, RewardFusion
from wmrl_env.fusion.groups import GroupIndex

# generated batches are often constant: that fallback's warning is expected here
pytestmark = pytest.mark.filterwarnings("ignore:calibration falls back to identity")

scores = st.floats(min_value=-10, max_value=10, allow_nan=False, width=64)


@st.composite
def batches(draw):
    num_groups = draw(st.integers(1, 12))
    group_size = draw(st.integers(1, 6))
    n = num_groups * group_size
    wm = draw(arrays(np.float64, n, elements=scores))
    real = draw(arrays(np.float64, n, elements=scores))
    anchored_groups = draw(arrays(np.bool_, num_groups))
    failed_members = draw(arrays(np.bool_, n))
    return num_groups, group_size, wm, real, anchored_groups, failed_members


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(METHODS), st.sampled_from(["batch", "group", "none"]))
def test_weights_positive_mean_one_and_advantages_centred(batch, method, scaling) -> None:
    num_groups, group_size, wm, real, anchored_groups, failed_members = batch
    group_ids = np.repeat(np.arange(num_groups), group_size)
    anchored = np.repeat(anchored_groups, group_size) | (method == "real")
    failed = anchored & failed_members
    real = np.where(anchored & ~failed, real, np.nan)
    if method == "ppi" and scaling == "group":  # refused: it would undo the 1/pi rectification
        with pytest.raises(ValueError, match="cannot be used with method 'ppi'"):
            RewardFusion(method=method, advantage_scaling=scaling)
        return
    fusion = RewardFusion(method=method, advantage_scaling=scaling, min_pairs=2)
    out = fusion.step(group_ids, wm, real, failed=failed)

    assert np.all(out.weights > 0)
    assert np.isclose(out.weights.mean(), 1.0)
    assert np.all(np.isfinite(out.advantages))
    if method != "wm":  # "wm" ignores real executions altogether
        assert np.all(out.advantages[failed] == 0)
    groups = GroupIndex.from_ids(group_ids)
    # relative to the group's own magnitude: scaling tiny centred rewards magnifies rounding
    magnitude = groups.sum(np.abs(out.advantages))
    assert np.all(np.abs(groups.sum(out.advantages)) <= 1e-6 * magnitude + 1e-12)


@settings(max_examples=150, deadline=None)
@given(arrays(np.float64, st.integers(2, 60), elements=scores), st.data())
def test_calibration_map_is_monotone(s, data) -> None:
    r = data.draw(arrays(np.float64, s.size, elements=scores))
    calibrator = OnlineCalibrator(min_pairs=2, min_groups=1)
    calibrator.update(s, r)
    grid = np.sort(data.draw(arrays(np.float64, 50, elements=scores)))
    mapped = calibrator.transform(grid)
    rounding = 1e-12 * (1 + np.abs(mapped).max())  # a few ulps of floating-point arithmetic
    assert np.all(np.diff(mapped) >= -rounding)
