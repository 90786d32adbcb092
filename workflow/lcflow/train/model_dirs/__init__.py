"""Trained-model directories written and read: one model, a blend of several, their scores and curves."""
