r"""A kin40k-like regression problem: the reach of an 8-link robot arm.

kin40k (Schwaighofer and Tresp, 2003) comes from a simulated robot arm;
this stand-in is written here from that description, for sizes and
noise levels of one's choosing.  Eight revolute joints, turning in
turn about the :math:`z` and the :math:`y` axis, with angles
:math:`\theta_j \sim U(-A, A)` (:math:`A = 2`) and links of lengths
0.3, 0.3, 0.28, 0.26, 0.24, 0.22, 0.2, 0.18 along each joint's :math:`x`
axis; the target is the distance from the hand to the point
:math:`(0.6, 0.3, 0.2)`, plus Gaussian noise of 2% of its standard
deviation.  At 36 000 training rows it is as hard as kin40k for
nyhopt's default run (test RMSE 0.25, kin40k's 0.28) and low in noise,
as kin40k is.
"""
from __future__ import annotations

import numpy as np

LINKS = np.array([0.3, 0.3, 0.28, 0.26, 0.24, 0.22, 0.2, 0.18])
TARGET = np.array([0.6, 0.3, 0.2])


def _rotations(axis, angles):
    c, s = np.cos(angles), np.sin(angles)
    R = np.zeros((angles.shape[0], 3, 3))
    if axis == "z":
        R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1], R[:, 2, 2] = c, -s, s, c, 1.0
    else:
        R[:, 0, 0], R[:, 0, 2], R[:, 2, 0], R[:, 2, 2], R[:, 1, 1] = c, s, -s, c, 1.0
    return R


def robot_arm(n, seed=0, reach=2.0, noise=0.02):
    """``(X, y)``: ``n`` joint-angle rows (n, 8) and the noisy distances (n,)."""
    rng = np.random.default_rng(seed)
    theta = rng.uniform(-reach, reach, size=(n, LINKS.size))
    frame = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    hand = np.zeros((n, 3))
    for j, length in enumerate(LINKS):
        frame = frame @ _rotations("z" if j % 2 == 0 else "y", theta[:, j])
        hand += frame[:, :, 0] * length
    y = np.linalg.norm(hand - TARGET, axis=1)
    return theta, y + noise * y.std() * rng.standard_normal(n)


def robot_arm_split(n_train, n_test, seed=0):
    """The first ``n_train`` rows to train on, the next ``n_test`` to test, standardized on the training part."""
    X, y = robot_arm(n_train + n_test, seed)
    Xtr, Xte, ytr, yte = X[:n_train], X[n_train:], y[:n_train], y[n_train:]
    mu, sd, ym, ys = Xtr.mean(axis=0), Xtr.std(axis=0), ytr.mean(), ytr.std()
    return (Xtr - mu) / sd, (ytr - ym) / ys, (Xte - mu) / sd, (yte - ym) / ys
