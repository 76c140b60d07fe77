"""The key and trust stores Kafka's ``ssl.*`` keys name, read into an ``ssl.SSLContext``
(``load_key_store``, ``load_trust_store``), by their type:

- ``PEM``: text holding a private key (``-----BEGIN PRIVATE KEY-----``, PKCS#8, or
  ``-----BEGIN ENCRYPTED PRIVATE KEY-----``, decrypted with the key password) and X.509
  certificates (``-----BEGIN CERTIFICATE-----`` blocks: the chain, leaf first; or, in a trust
  store, the trusted authorities); new lines before, after and between the blocks, and CRLF,
  are taken as Kafka's ``PemParser`` takes them. A file, or the text of a key (inline);
- ``PKCS12``: a DER ``PFX`` file with its store password (read with ``cryptography``): the key
  and its certificate chain, or the certificates of a trust store;
- ``JKS`` (Kafka's default type): as Java's key store, which reads a PKCS#12 file under that
  type; a Java key store file itself (JKS, magic ``FE ED FE ED``; JCEKS, ``CE CE CE CE``),
  which only Java reads, is refused with the ``keytool`` command that converts it.

Python's ``ssl`` reads a private key from a file only: inline PEM and the key of a PKCS#12 file
are written, for the load only, to a file in a private temporary directory (mode 0700) that is
removed at once. Every error is an ``InvalidConfigError`` naming the key and, for a file, its
path; a password or a key never appears in one.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from storage.errors import InvalidConfigError

PEM, PKCS12, JKS = "PEM", "PKCS12", "JKS"
JAVA_STORE_MAGICS = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")   # JKS, JCEKS


def load_key_store(context: ssl.SSLContext, key: str, kind: str, path: str | None,
                   text: str | None, password: str | None) -> None:
    """The private key and certificate chain of the store at ``path`` (or the PEM ``text``) as
    ``context``'s own. ``password`` is the key's (PEM) or the store's (PKCS#12)."""
    if text is not None:
        _load_chain(context, key, "the inline key and certificate chain", text, password)
        return
    assert path is not None
    if kind == PEM:
        _read(key, path)
        try:
            context.load_cert_chain(path, password=password or "")
        except (ssl.SSLError, ValueError) as err:
            raise _unreadable(key, path, "a PEM key store", err) from None
        return
    pem = _pkcs12_pem(key, path, _java_checked(key, path), password, with_key=True)
    _load_chain(context, key, path, pem, None)


def load_trust_store(context: ssl.SSLContext, key: str, kind: str, path: str | None,
                     text: str | None, password: str | None) -> None:
    """The certificates of the store at ``path`` (or the PEM ``text``) as the authorities
    ``context`` trusts."""
    where = path or "the inline certificates"
    try:
        if text is not None:
            context.load_verify_locations(cadata=text)
        elif kind == PEM:
            assert path is not None
            _read(key, path)
            context.load_verify_locations(cafile=path)
        else:
            assert path is not None
            context.load_verify_locations(cadata=_pkcs12_pem(
                key, path, _java_checked(key, path), password, with_key=False))
    except (ssl.SSLError, ValueError) as err:
        raise _unreadable(key, where, "a trust store", err) from None


def _read(key: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise InvalidConfigError(f"{key}={path}: cannot read it: {err.strerror or err}",
                                 key=key, value=path) from None


def _unreadable(key: str, where: str, what: str, err: BaseException) -> InvalidConfigError:
    reason = getattr(err, "reason", None) or str(err) or type(err).__name__
    return InvalidConfigError(f"{key}={where}: not {what} this listener can use ({reason}); a "
                              "wrong password, a key that does not match its certificate, or "
                              "the wrong ssl.*.type", key=key, value=where)


def _java_checked(key: str, path: str) -> bytes:
    """The file's bytes; a Java key store (which only Java reads) is refused with its fix."""
    data = _read(key, path)
    if data[:4] in JAVA_STORE_MAGICS:
        raise InvalidConfigError(
            f"{key}={path}: a Java key store (JKS), which only Java reads; convert it to "
            f"PKCS#12 (keytool -importkeystore -srckeystore {path} -destkeystore "
            f"{Path(path).with_suffix('.p12')} -deststoretype PKCS12) and set "
            f"{key.rsplit('.', 1)[0]}.type=PKCS12", key=key, value=path)
    return data


def _pkcs12_pem(key: str, path: str, data: bytes, password: str | None, *,
                with_key: bool) -> str:
    """The private key (``with_key``) and certificates of a PKCS#12 file, as PEM text."""
    from cryptography.hazmat.primitives.serialization import (Encoding, NoEncryption,
                                                              PrivateFormat, pkcs12)

    try:
        store = pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError as err:
        raise _unreadable(key, path, "a PKCS#12 store", err) from None
    certificates = ([store.cert.certificate] if store.cert is not None else []) + \
        [c.certificate for c in store.additional_certs]
    if with_key and (store.key is None or store.cert is None):
        raise InvalidConfigError(f"{key}={path}: the PKCS#12 store holds no private key with "
                                 "its certificate", key=key, value=path)
    if not certificates:
        raise InvalidConfigError(f"{key}={path}: the PKCS#12 store holds no certificate",
                                 key=key, value=path)
    text = "".join(c.public_bytes(Encoding.PEM).decode() for c in certificates)
    if with_key:
        assert store.key is not None
        text = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                       NoEncryption()).decode() + text
    return text


def _load_chain(context: ssl.SSLContext, key: str, where: str, pem: str,
                password: str | None) -> None:
    """``load_cert_chain`` of PEM text (a private key and its chain): written to a file of a
    private temporary directory for the load, removed at once."""
    with tempfile.TemporaryDirectory(prefix="strata-tls-") as private:
        path = os.path.join(private, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(pem)
        try:
            context.load_cert_chain(path, password=password or "")
        except (ssl.SSLError, ValueError) as err:
            raise _unreadable(key, where, "a key store", err) from None
