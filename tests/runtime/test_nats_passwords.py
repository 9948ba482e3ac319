"""Passwords nats-server reads through a variable (`password: $ADMISSION_PASSWORD`, the chart's
nats.conf). A variable's value is parsed as a config value: one beginning with `-`, or with
digits and a `-`, is refused ("Expected a digit") and NATS never starts — about one install in
ten with the earlier `token_urlsafe` passwords, and the chart test's own one run in five. The
real nats-server (`-t`: check the configuration, start nothing) is the judge here."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from services.kube.natssecrets import missing_passwords
from services.runtime.natsauth import new_password, readable_password
from services.runtime.natsserver import NatsServer, NatsServerError, find_binary

CONF = "authorization { users = [ { user: a, password: $P } ] }\n"


def nats_reads(conf: Path, value: str) -> bool:
    done = subprocess.run([find_binary(), "-c", str(conf), "-t"], env={**os.environ, "P": value},
                          capture_output=True, timeout=30)  # fmt: skip
    return done.returncode == 0


def test_every_new_password_is_read_back_and_the_unreadable_shapes_are_known(tmp_path: Path) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(CONF)
    made = [new_password() for _ in range(60)]
    assert len(set(made)) == len(made) and all(len(p) >= 32 for p in made)
    assert all(readable_password(p) and nats_reads(conf, p) for p in made)
    for refused in ("-Cy9avNNN0vjyCQhOtE6AfWkxb0VVKR4", "18-ob9Kg4Dab4tJK9-1Uua38ZdgdhcZH"):
        assert not nats_reads(conf, refused) and not readable_password(refused)
    assert nats_reads(conf, "_V0OwpoBPLqt5pbyouW7bWhbBW_be-tC") and readable_password("_V0Owpo")


def test_a_secret_keeps_its_readable_passwords_and_replaces_the_others() -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    existing = {"admission": b64("kept-by-the-user"), "queue": b64("-made-by-an-earlier-release"),
                "scheduler": b64("18-ob9Kg4Dab4tJK9"), "route": "not base64!"}  # fmt: skip
    added = missing_passwords(existing, ["admission", "queue", "scheduler", "route", "allocator"])
    assert sorted(added) == ["allocator", "queue", "route", "scheduler"]
    assert all(readable_password(base64.b64decode(v).decode()) for v in added.values())


def test_a_server_that_refuses_its_configuration_says_why(tmp_path: Path, monkeypatch) -> None:
    """Its own words come from stderr (its log file is not open yet): the flake above read
    "nats-server exited with 1:" and nothing more."""
    monkeypatch.setenv("P", "-Cy9avNNN0vjyCQhOtE6AfWkxb0VVKR4")
    with pytest.raises(NatsServerError, match="variable reference for 'P' on line 1 could not be parsed"):
        NatsServer(data_dir=tmp_path / "nats", config=CONF).start()
