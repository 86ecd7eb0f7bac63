"""Real tabular datasets that ship inside installed packages (no download at any point).

Each loader returns a :class:`Dataset`: numeric features (NaN marks a missing value), a target,
and the words an agent needs to understand them. scikit-learn's bundled loaders come with the
core install; the statsmodels datasets need the ``tasks`` extra
(``pip install 'wmrl-env[tasks]'``).

Example:
    >>> data = load_dataset("iris")
    >>> data.X.shape, data.kind, data.feature_names[0]
    ((150, 4), 'multiclass', 'sepal_length_cm')
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from wmrl_env.utils.imports import require

__all__ = ["DATASET_LOADERS", "Dataset", "TaskKind", "load_dataset"]

TaskKind = Literal["binary", "multiclass", "regression"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A supervised tabular dataset with the words that describe it.

    Attributes:
        name: short identifier.
        title: one line naming the data and where it comes from.
        about: what a row is and what the target means (plain sentences).
        kind: ``binary``, ``multiclass`` or ``regression``.
        target: what the target column holds, in words.
        X: features, float64, NaN where a value is missing.
        y: targets (integer class labels for classification, floats for regression).
        feature_names: CSV-safe column names, one per feature column.
        notes: extra facts about the features (units, categorical codes), may be empty.
    """

    name: str
    title: str
    about: str
    kind: TaskKind
    target: str
    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    notes: str = ""

    def __post_init__(self) -> None:
        if self.X.ndim != 2 or len(self.X) != len(self.y):
            raise ValueError(f"{self.name}: X must be 2-D with one row per target")
        if self.X.shape[1] != len(self.feature_names):
            raise ValueError(f"{self.name}: {self.X.shape[1]} columns but feature names differ")


def column_name(raw: str) -> str:
    """A CSV-safe snake_case column name.

    >>> column_name("sepal length (cm)"), column_name("od280/od315_of_diluted_wines")
    ('sepal_length_cm', 'od280_od315_of_diluted_wines')
    """
    return re.sub(r"[^0-9a-zA-Z]+", "_", str(raw)).strip("_").lower()


def _from_frame(frame: Any, target: str, drop: tuple[str, ...] = ()) -> tuple[np.ndarray, ...]:
    features = [c for c in frame.columns if c != target and c not in drop]
    return (
        frame[features].to_numpy(dtype=np.float64),
        frame[target].to_numpy(),
        tuple(column_name(c) for c in features),
    )


def _statsmodels_frame(name: str) -> Any:
    sm_datasets = require("statsmodels.datasets", f"the '{name}' task (statsmodels data)")
    return getattr(sm_datasets, name).load_pandas().data


# ---------------------------------------------------------------- scikit-learn (core install)


def _from_sklearn(
    name: str,
    *,
    title: str,
    about: str,
    kind: TaskKind,
    target: str,
    feature_names: tuple[str, ...] | None = None,
    **loader_kwargs: Any,
) -> Dataset:
    from sklearn import datasets

    bundle = getattr(datasets, f"load_{name}")(**loader_kwargs)
    return Dataset(
        name=name,
        title=title,
        about=about,
        kind=kind,
        target=target,
        X=bundle.data.astype(np.float64),
        y=bundle.target.astype(np.float64 if kind == "regression" else np.int64),
        feature_names=feature_names or tuple(column_name(f) for f in bundle.feature_names),
    )


def _iris() -> Dataset:
    return _from_sklearn(
        "iris",
        title="Fisher's iris flowers (scikit-learn bundled data)",
        about="Each row is one iris flower measured in centimetres.",
        kind="multiclass",
        target="species: 0 = setosa, 1 = versicolor, 2 = virginica",
    )


def _wine() -> Dataset:
    return _from_sklearn(
        "wine",
        title="UCI wine recognition: chemical analysis of Italian wines (scikit-learn)",
        about="Each row is one wine; features are results of a chemical analysis.",
        kind="multiclass",
        target="cultivar (grape variety) of the wine: 0, 1 or 2",
    )


def _breast_cancer() -> Dataset:
    return _from_sklearn(
        "breast_cancer",
        title="Wisconsin diagnostic breast cancer (scikit-learn bundled data)",
        about="Each row describes the cell nuclei in a digitised image of a breast mass "
        "(mean, standard error and worst value of ten measurements).",
        kind="binary",
        target="1 = benign, 0 = malignant",
    )


def _digits() -> Dataset:
    return _from_sklearn(
        "digits",
        title="Handwritten digits, 8x8 images (scikit-learn bundled data)",
        about="Each row is an 8x8 image of a handwritten digit; each feature is the ink "
        "count 0-16 of one pixel, row by row.",
        kind="multiclass",
        target="the digit shown, 0-9",
        feature_names=tuple(f"pixel_{r}_{c}" for r in range(8) for c in range(8)),
    )


def _diabetes() -> Dataset:
    return _from_sklearn(
        "diabetes",
        title="Diabetes progression (Efron et al. 2004, scikit-learn bundled data)",
        about="Each row is one diabetes patient at baseline: age, sex (1 or 2), body mass "
        "index, mean blood pressure and six blood serum measurements s1-s6.",
        kind="regression",
        target="a quantitative measure of disease progression one year after baseline",
        scaled=False,
    )


# ---------------------------------------------------------------- statsmodels ('tasks' extra)


def _fair() -> Dataset:
    frame = _statsmodels_frame("fair")
    X, affairs, names = _from_frame(frame, "affairs")
    return Dataset(
        name="fair",
        title="Fair (1978) survey of married women on extramarital affairs (statsmodels)",
        about="Each row is one respondent of a 1974 magazine survey.",
        kind="binary",
        target="1 if the respondent reported time spent in extramarital affairs, else 0",
        X=X,
        y=(affairs > 0).astype(np.int64),
        feature_names=names,
        notes="rate_marriage 1 (very poor) to 5 (very good); religious 1 (not) to 4 "
        "(strongly); occupation and occupation_husb are coded 1-6 (student to professional).",
    )


def _randhie() -> Dataset:
    frame = _statsmodels_frame("randhie")
    X, y, names = _from_frame(frame, "mdvis")
    return Dataset(
        name="randhie",
        title="RAND Health Insurance Experiment (statsmodels)",
        about="Each row is one person-year in the RAND health insurance experiment: "
        "coinsurance (lncoins = log(coinsurance + 1)), individual deductible plan (idp), "
        "log annual participation incentive (lpi), log max medical deductible (fmde), "
        "physical limitation (physlm), number of chronic diseases (disea) and self-rated "
        "health (hlthg good, hlthf fair, hlthp poor; all 0 = excellent).",
        kind="regression",
        target="number of outpatient visits to a medical doctor in the year",
        X=X,
        y=y.astype(np.float64),
        feature_names=names,
    )


def _anes96() -> Dataset:
    frame = _statsmodels_frame("anes96")
    X, vote, names = _from_frame(frame, "vote")
    return Dataset(
        name="anes96",
        title="American National Election Studies 1996 (statsmodels)",
        about="Each row is one survey respondent. popul is the population of their town "
        "(thousands; logpopul its log), TVnews the days per week they watch TV news, "
        "selfLR / ClinLR / DoleLR place the respondent, Clinton and Dole on a 1 (extremely "
        "liberal) to 7 (extremely conservative) scale, PID is party identification 0 "
        "(strong Democrat) to 6 (strong Republican), educ and income are ordinal codes.",
        kind="binary",
        target="presidential vote: 1 = Dole, 0 = Clinton",
        X=X,
        y=vote.astype(np.int64),
        feature_names=names,
    )


def _modechoice() -> Dataset:
    frame = _statsmodels_frame("modechoice")
    X, choice, names = _from_frame(frame, "choice", drop=("individual",))
    return Dataset(
        name="modechoice",
        title="Travel mode choice between Sydney and Melbourne (Greene, statsmodels)",
        about="Each row is one (traveller, travel mode) pair; every traveller appears four "
        "times, once per mode (1 air, 2 train, 3 bus, 4 car). ttme is terminal waiting time, "
        "invc in-vehicle cost, invt in-vehicle time, gc generalised cost, hinc household "
        "income, psize party size.",
        kind="binary",
        target="1 if the traveller chose this mode, else 0",
        X=X,
        y=choice.astype(np.int64),
        feature_names=names,
    )


def _star98() -> Dataset:
    frame = _statsmodels_frame("star98")
    nabove, nbelow = frame["NABOVE"].to_numpy(), frame["NBELOW"].to_numpy()
    X, _, names = _from_frame(frame, "NABOVE", drop=("NBELOW",))
    return Dataset(
        name="star98",
        title="California STAR 1998 math test results by school district (statsmodels)",
        about="Each row is one California school district: share of low-income pupils, "
        "ethnic composition (percent), teacher experience and salary, spending per pupil, "
        "pupil-teacher ratio, share of charter and year-round schools, and products of "
        "some of these.",
        kind="regression",
        target="share of pupils scoring above the national median in math",
        X=X,
        y=nabove / (nabove + nbelow),
        feature_names=names,
    )


def _grunfeld() -> Dataset:
    frame = _statsmodels_frame("grunfeld").copy()
    firms = sorted(frame["firm"].unique())
    frame["firm"] = frame["firm"].map({name: i for i, name in enumerate(firms)})
    X, y, names = _from_frame(frame, "invest")
    return Dataset(
        name="grunfeld",
        title="Grunfeld investment data, 11 US firms 1935-1954 (statsmodels)",
        about="Each row is one firm in one year: market value of the firm (value), stock of "
        "plant and equipment (capital), firm code and year.",
        kind="regression",
        target="gross investment of the firm in that year (millions of 1947 dollars)",
        X=X,
        y=y.astype(np.float64),
        feature_names=names,
        notes="firm is a category code: " + ", ".join(f"{i} {n}" for i, n in enumerate(firms)),
    )


def _macrodata() -> Dataset:
    frame = _statsmodels_frame("macrodata")
    X, y, names = _from_frame(frame, "unemp", drop=("year", "quarter"))
    return Dataset(
        name="macrodata",
        title="US macroeconomic quarterly data 1959-2009 (statsmodels)",
        about="Each row is one quarter: real GDP, consumption, investment, government "
        "spending and disposable income, CPI, M1, 3-month T-bill rate, population, "
        "inflation and real interest rate.",
        kind="regression",
        target="unemployment rate (percent)",
        X=X,
        y=y.astype(np.float64),
        feature_names=names,
    )


def _engel() -> Dataset:
    frame = _statsmodels_frame("engel")
    X, y, names = _from_frame(frame, "foodexp")
    return Dataset(
        name="engel",
        title="Engel food expenditure of Belgian working-class households, 1857 (statsmodels)",
        about="Each row is one household; the only feature is annual household income "
        "(Belgian francs).",
        kind="regression",
        target="annual food expenditure of the household (Belgian francs)",
        X=X,
        y=y.astype(np.float64),
        feature_names=names,
    )


def _sunspots() -> Dataset:
    frame = _statsmodels_frame("sunspots")
    activity = frame["SUNACTIVITY"].to_numpy(dtype=np.float64)
    lags = 9
    X = np.column_stack([activity[lags - k - 1 : len(activity) - k - 1] for k in range(lags)])
    return Dataset(
        name="sunspots",
        title="Yearly sunspot numbers 1700-2008 (statsmodels)",
        about="Each row is one year; lag_k is the sunspot number k years earlier.",
        kind="regression",
        target="the yearly sunspot number of this year",
        X=X,
        y=activity[lags:],
        feature_names=tuple(f"lag_{k + 1}" for k in range(lags)),
    )


def _fertility() -> Dataset:
    frame = _statsmodels_frame("fertility")
    frame = frame[frame["2010"].notna()]
    years = [str(year) for year in range(1960, 2010, 5)]
    return Dataset(
        name="fertility",
        title="World Bank total fertility rate by country, 1960-2013 (statsmodels)",
        about="Each row is one country or region; feature yYYYY is its total fertility rate "
        "(births per woman) in year YYYY. Some early years are missing.",
        kind="regression",
        target="the total fertility rate of the country in 2010",
        X=frame[years].to_numpy(dtype=np.float64),
        y=frame["2010"].to_numpy(dtype=np.float64),
        feature_names=tuple(f"y{year}" for year in years),
    )


DATASET_LOADERS: dict[str, Callable[[], Dataset]] = {
    "iris": _iris,
    "wine": _wine,
    "breast_cancer": _breast_cancer,
    "digits": _digits,
    "diabetes": _diabetes,
    "fair": _fair,
    "randhie": _randhie,
    "anes96": _anes96,
    "modechoice": _modechoice,
    "star98": _star98,
    "grunfeld": _grunfeld,
    "macrodata": _macrodata,
    "engel": _engel,
    "sunspots": _sunspots,
    "fertility": _fertility,
}
"""Real datasets by name; the first five need only scikit-learn, the rest statsmodels."""


def load_dataset(name: str) -> Dataset:
    """Load a bundled real dataset by name (see :data:`DATASET_LOADERS`)."""
    try:
        loader = DATASET_LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASET_LOADERS)}") from None
    return loader()
