"""The slurmrestd JWT is renewed before it expires and after a 401 (issue 12, item 10)."""

from __future__ import annotations

import base64
import json
import os
import subprocess

from gpufair.adapters.slurm.token import TokenSource, token_expiry


def jwt(exp: float | None, user: str = "root") -> str:
    """A token shaped like slurmrestd's (HS256; the signature is not ours to check)."""
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    claims = {"sun": user, **({} if exp is None else {"exp": exp, "iat": exp - 1800})}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_expiry_comes_from_the_claim():
    assert token_expiry(jwt(1_800_000_000)) == 1_800_000_000
    assert token_expiry(jwt(None)) is None
    for junk in ("", "abc", "a.b", "a.!!!.c", "a.bnVsbA.c"):
        assert token_expiry(junk) is None


class Minter:
    """``scontrol token`` as a function: mints tokens valid for ``lifespan`` from ``now``."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self.calls: list[list[str]] = []
        self.fail = False

    def __call__(self, argv):
        self.calls.append(list(argv))
        if self.fail:
            return subprocess.CompletedProcess(argv, 1, "", "Invalid user for token")
        life = int(argv[-1].split("=")[1])
        return subprocess.CompletedProcess(argv, 0, f"SLURM_JWT={jwt(self.clock() + life)}\n",
                                           "")


def test_renewed_at_80_percent_of_its_life_and_saved(tmp_path):
    now = [1_000_000.0]
    minter = Minter(lambda: now[0])
    token_file = tmp_path / "slurm.jwt"
    source = TokenSource(str(token_file), user="slurm", renew=True, lifespan_s=1800,
                         clock=lambda: now[0], run=minter)
    first = source.current()                     # no token yet: minted at once
    assert first and token_expiry(first) == now[0] + 1800
    assert minter.calls == [["scontrol", "token", "username=slurm", "lifespan=1800"]]
    assert token_file.read_text().strip() == first and (token_file.stat().st_mode & 0o777) \
        == 0o600
    now[0] += 1400                               # 78 %: still good
    assert source.current() == first and len(minter.calls) == 1
    now[0] += 100                                # 83 %: renewed before it expires
    second = source.current()
    assert second != first and source.renewals == 2
    assert token_file.read_text().strip() == second


def test_a_401_renews_at_once_and_a_failed_renewal_is_counted(tmp_path):
    now = [1_000_000.0]
    minter = Minter(lambda: now[0])
    source = TokenSource(None, renew=True, clock=lambda: now[0], run=minter)
    first = source.current()
    now[0] += 10                                 # long before 80 %, but slurmrestd said 401
    assert source.rejected() != first and source.renewals == 2
    minter.fail = True
    assert source.rejected() is not None and source.failures == 1   # keeps the last one


def test_without_renewal_the_file_is_reread_when_it_changes(tmp_path):
    now = [1_000_000.0]
    token_file = tmp_path / "slurm.jwt"
    token_file.write_text(f"SLURM_JWT={jwt(now[0] + 600)}\n")
    source = TokenSource(str(token_file), clock=lambda: now[0])
    first = source.current()
    assert first == jwt(now[0] + 600)
    replacement = jwt(now[0] + 1200)
    token_file.write_text(replacement + "\n")
    os.utime(token_file, (now[0] + 5, now[0] + 5))
    assert source.current() == replacement
    assert source.renewals == 0
