"""Which round's weights a deep run keeps: the rounds that may be kept, and which of two is better."""


def selectable(step: int, warmup_steps: int, total_steps: int) -> bool:
    """Whether the weights after ``step`` may become the best: not while the rate still warms up
    (on a small val set an undertrained model can score best by chance), except at the very end."""
    return step > warmup_steps or step >= total_steps


def better(row: dict, best: list[float], select_by: str, kept: bool) -> bool:
    """Whether round ``row`` beats the ``best`` (val accuracy, val loss) kept so far (``kept``: a round
    was): by accuracy, ties to the lower loss, or by the loss alone, which moves with every row's
    probability where the accuracy of a hundred rows moves in steps of one row."""
    if not kept:
        return True
    accuracy, loss = best
    if select_by == "loss":
        return row["val_loss"] < loss
    return row["val_accuracy"] > accuracy or (
        row["val_accuracy"] == accuracy and row["val_loss"] < loss
    )
