"""Stage 3: hyperparameter optimisation, workers sharing one Optuna study."""
