"""nlp_qt: quick-thought sentence encoders (QT, debiased and hard-negative objectives) and a
SentEval-protocol evaluator. See docs/nlp_qt.md."""
