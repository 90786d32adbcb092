"""Observation dropout: each training series loses some of its observed steps, filled again from the
others, so a network learns from the gaps clouds could have left as well as from the ones they left
(``drop_observations``)."""

import torch


def drop_observations(xb: torch.Tensor, share: float, flag: int) -> torch.Tensor:
    """``xb`` (samples, steps, features) prepared series, features ``[:flag]`` the gap-filled values and
    ``flag`` the observed flag; each observed step hidden with probability ``share``.

    A hidden step's flag becomes 0 and the values of every step are interpolated again, linearly in
    steps, from the steps still observed (ends take the nearest), as :func:`lcflow.common.features.prepare`
    fills the gaps of a series with those steps missing; standardisation is linear, so filling the
    standardised values is filling the raw ones (values clipped by the standardiser excepted, and bands a
    kept step lacked, whose fill came from steps now hidden). A series
    that would lose every observation keeps all of them; features after ``flag`` (a position) are kept.
    """
    if share <= 0:
        return xb
    observed = xb[:, :, flag] > 0.5
    keep = observed & (torch.rand(observed.shape, device=xb.device) >= share)
    keep = torch.where((~keep.any(dim=1))[:, None], observed, keep)
    n_steps = keep.shape[1]
    steps = torch.arange(n_steps, device=xb.device).expand_as(keep)
    before = torch.where(keep, steps, -1).cummax(dim=1).values
    after = torch.where(keep, steps, n_steps).flip(1).cummin(dim=1).values.flip(1)
    before, after = (
        torch.where(before < 0, after, before),
        torch.where(after >= n_steps, before, after),
    )
    # nothing observed at all: each step its own neighbour, so the series is left as it is
    unobserved = ~keep.any(dim=1, keepdim=True)
    before, after = torch.where(unobserved, steps, before), torch.where(unobserved, steps, after)
    weight = ((steps - before) / (after - before).clamp(min=1)).to(xb.dtype)[:, :, None]
    values = xb[:, :, :flag]
    start = values.gather(1, before[:, :, None].expand_as(values))
    end = values.gather(1, after[:, :, None].expand_as(values))
    out = xb.clone()
    out[:, :, :flag] = start + weight * (end - start)
    out[:, :, flag] = keep.to(xb.dtype)
    return out
