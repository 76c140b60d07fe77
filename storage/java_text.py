"""Java's text rules that Kafka's formats inherit: ``java_string`` decodes bytes as
``new String(bytes, UTF_8)`` does, so a reader of Kafka's records sees the strings a Java
broker would (malformed UTF-8 becomes U+FFFD, grouped as Java groups it)."""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def java_string(raw: bytes) -> str:
    """``new String(raw, UTF_8)``: well-formed UTF-8 decodes as anywhere; a malformed sequence
    becomes U+FFFD by Java's rules (``_java_utf8``), which group bytes differently from
    Python's ``errors="replace"``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8(raw)


def _continues(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _java_utf8(src: bytes) -> str:
    """The replacing decoder of Java's ``String(byte[], UTF_8)`` (JDK 17-25
    ``decodeUTF8_UTF16``): a bad lead byte, a surrogate, an overlong or out-of-range form each
    give one U+FFFD for the bytes Java groups together, and a sequence cut off by the end gives
    one for what is left."""
    out: list[str] = []
    sp, end = 0, len(src)
    while sp < end:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp >= end:
                out.append(REPLACEMENT)
                break
            if _continues(src[sp]):
                out.append(chr((b1 & 0x1F) << 6 | src[sp] & 0x3F))
                sp += 1
            else:
                out.append(REPLACEMENT)
        elif 0xE0 <= b1 <= 0xEF:
            overlong = b1 == 0xE0 and sp < end and src[sp] & 0xE0 == 0x80
            if sp + 1 < end:
                b2, b3 = src[sp], src[sp + 1]
                if overlong or not _continues(b2) or not _continues(b3):
                    out.append(REPLACEMENT)
                    sp += 0 if overlong or not _continues(b2) else 1
                    continue
                code = (b1 & 0x0F) << 12 | (b2 & 0x3F) << 6 | b3 & 0x3F
                out.append(REPLACEMENT if 0xD800 <= code <= 0xDFFF else chr(code))
                sp += 2
            else:
                out.append(REPLACEMENT)
                if not (sp < end and (overlong or not _continues(src[sp]))):
                    break                                   # cut off by the end
        elif 0xF0 <= b1 <= 0xF7:
            bad_second = sp < end and (
                (b1 == 0xF0 and not 0x90 <= src[sp] <= 0xBF)
                or (b1 == 0xF4 and src[sp] & 0xF0 != 0x80) or not _continues(src[sp]))
            if sp + 2 < end:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                code = (b1 & 0x07) << 18 | (b2 & 0x3F) << 12 | (b3 & 0x3F) << 6 | b4 & 0x3F
                if (_continues(b2) and _continues(b3) and _continues(b4)
                        and 0x10000 <= code <= 0x10FFFF):
                    out.append(chr(code))
                    sp += 3
                    continue
                out.append(REPLACEMENT)
                if b1 > 0xF4 or bad_second:
                    continue
                sp += 1 if not _continues(b3) else 2
            else:
                out.append(REPLACEMENT)
                if b1 > 0xF4 or bad_second:
                    continue
                sp += 1
                if not (sp < end and not _continues(src[sp])):
                    break                                   # cut off by the end
        else:
            out.append(REPLACEMENT)
    return "".join(out)


__all__ = ["REPLACEMENT", "java_string"]
