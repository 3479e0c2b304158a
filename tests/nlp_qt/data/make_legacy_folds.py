"""Writes legacy_folds.json: test folds drawn by scikit-learn 0.20.4's StratifiedKFold(k, shuffle=True,
random_state=seed), for tests/nlp_qt/test_senteval.py (our `--folds legacy` must draw the same).

Run with the scikit-learn of SentEval's time, e.g. (Python 3.7; the registry's wheels):

    python3.7 -m venv /tmp/sk020 && /tmp/sk020/bin/pip install scikit-learn==0.20.4 numpy==1.16.6 scipy==1.2.3
    /tmp/sk020/bin/python tests/nlp_qt/data/make_legacy_folds.py
"""

import json
import os

import numpy as np
import sklearn
from sklearn.model_selection import StratifiedKFold

rng = np.random.RandomState(0)
cases = [
    ("three classes in blocks", [0] * 37 + [1] * 25 + [2] * 11, 3, 1111),
    ("binary, 800 shuffled (CR-like), SentEval's 10 folds", rng.permutation([1] * 430 + [0] * 370).tolist(), 10, 1111),
    ("six classes, unbalanced (TREC-like)", rng.choice(6, size=545, p=[.02, .21, .23, .22, .15, .17]).tolist(), 10,
     1111),
    ("labels 3 and 7, another seed", rng.choice([3, 7], size=101).tolist(), 5, 7),
    ("a class with fewer examples than folds", [0] * 40 + [1] * 3, 5, 1111),
    ("sorted by label (SentEval's order), 9 folds", [0] * 50 + [1] * 61, 9, 0),
]
out = {"scikit_learn": sklearn.__version__, "numpy": np.__version__, "cases": []}
for name, y, k, seed in cases:
    y = np.asarray(y)
    fold = np.full(len(y), -1)
    for j, (_, test) in enumerate(StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y)):
        fold[test] = j
    out["cases"].append({"name": name, "y": y.tolist(), "k": k, "seed": seed, "test_fold": fold.tolist()})
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "legacy_folds.json")
with open(path, "w") as fh:
    json.dump(out, fh, separators=(",", ":"))
    fh.write("\n")
print("wrote", path, "with scikit-learn", sklearn.__version__)
