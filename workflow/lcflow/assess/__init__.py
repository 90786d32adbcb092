"""Stage 6: accuracy of the maps (reference sample, test samples, truth) and the design of reference samples."""
