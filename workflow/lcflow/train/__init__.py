"""Stage 4: the models, their hyperparameters, and training (Random Forest in one process, deep
models data-parallel over Horovod ranks)."""
