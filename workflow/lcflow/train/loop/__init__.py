"""The deep models' training loop: rounds of optimiser steps over a seeded stream of rows, checkpoints,
the recipe in steps and what a batch goes through."""
