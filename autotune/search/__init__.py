"""The search: evaluators (Config x Problem -> Measurement, on the GPU or from a replay table),
the static cost model, Optuna studies, the trial loop, families in turn, several processes."""
