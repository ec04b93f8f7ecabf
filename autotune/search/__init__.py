"""The search: the trial loop over Optuna studies, families in turn, several processes.

Evaluators (Config x Problem -> Measurement, on the GPU or from a replay table) and the static
cost model live here too.
"""
