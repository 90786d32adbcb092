"""Stage 5: hyperparameter optimisation, workers sharing one Optuna study."""
