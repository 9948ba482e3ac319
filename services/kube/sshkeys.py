"""The key pair a Job's ssh plugin gives its pods: RSA 2048, the private key in PEM (PKCS#1,
"RSA PRIVATE KEY", as Volcano's controller writes it and every OpenSSH reads it), the public
key as an authorized_keys line.

Made in the job controller's shell, never in the core: it is randomness, made once per Job
(the Secret found on a restart is kept: pods running with it would lose each other)."""

from __future__ import annotations

RSA_BITS = 2048


def new_key_pair() -> tuple[str, str]:
    """(private key PEM, public key line ending in a newline). Blocking (tens of ms): call it
    in a thread. `cryptography` is imported here, not with the queue service."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())  # fmt: skip
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private.decode(), public.decode() + "\n"
