"""The Unicode tables of the reference WordPiece, so that ours classifies every character as it does.

BERT's basic tokenizer sorts characters by their Unicode general category: controls (Cc, Cf,
Co) are dropped, non-spacing marks (Mn) are the accents stripped after NFD, punctuation (P*)
is cut off as a word of its own. HF `tokenizers`, which sentence-transformers runs, reads the
categories from the Rust crate unicode_categories, whose tables are Unicode 8.0 (2015).
Python's `unicodedata` is newer (Unicode 14.0 in Python 3.11, 15.1 in 3.13), and for a
few hundred characters the two disagree:

- characters added since Unicode 8.0 are unassigned (Cn) to the reference: not a control, not
  an accent, not punctuation, so kept inside their word (which then becomes [UNK]);
- six characters changed category since (U+1734 was Mn, now Mc; U+1885 was Lo, now Mn; …).

Only the characters whose new category would change what BERT does with them are listed:
the added marks, formats and punctuation (`ADDED_SINCE_8`) and the six (`RECATEGORISED`).
The lists were read off Python 3.13's `unicodedata` (Unicode 15.1) against the reference;
tests/test_wordpiece.py sweeps all 1,112,064 code points against HF to hold them. A Python
whose Unicode is newer than 15.1 may know marks added later that are missing here.

>>> category("\u0301"), category("\u1734"), category("\u2e43"), unicodedata.category("\u2e43")
('Mn', 'Mn', 'Cn', 'Po')
"""
from __future__ import annotations

import unicodedata

__all__ = ["UNICODE_VERSION", "ADDED_SINCE_8", "RECATEGORISED", "category"]

UNICODE_VERSION = "8.0.0"  # the reference's tables (HF tokenizers -> unicode_categories 0.1.1)

# Marks (Mn), formats (Cf) and punctuation (P*) added since Unicode 8.0, inclusive ranges.
ADDED_SINCE_8 = (
    (0x061D, 0x061D), (0x07FD, 0x07FD), (0x0890, 0x0891), (0x0898, 0x089F), (0x08CA, 0x08E2),
    (0x09FD, 0x09FE), (0x0A76, 0x0A76), (0x0AFA, 0x0AFF), (0x0B55, 0x0B55), (0x0C04, 0x0C04),
    (0x0C3C, 0x0C3C), (0x0C77, 0x0C77), (0x0C84, 0x0C84), (0x0D00, 0x0D00), (0x0D3B, 0x0D3C),
    (0x0D81, 0x0D81), (0x0EBA, 0x0EBA), (0x0ECE, 0x0ECE), (0x180F, 0x180F), (0x1ABF, 0x1ACE),
    (0x1B7D, 0x1B7E), (0x1DF6, 0x1DFB), (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0xA82C, 0xA82C),
    (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0x10D24, 0x10D27), (0x10EAB, 0x10EAD), (0x10EFD, 0x10EFF),
    (0x10F46, 0x10F50), (0x10F55, 0x10F59), (0x10F82, 0x10F89), (0x11070, 0x11070), (0x11073, 0x11074),
    (0x110C2, 0x110C2), (0x110CD, 0x110CD), (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x11241, 0x11241),
    (0x1133B, 0x1133B), (0x11438, 0x1143F), (0x11442, 0x11444), (0x11446, 0x11446), (0x1144B, 0x1144F),
    (0x1145A, 0x1145B), (0x1145D, 0x1145E), (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1182F, 0x11837),
    (0x11839, 0x1183B), (0x1193B, 0x1193C), (0x1193E, 0x1193E), (0x11943, 0x11946), (0x119D4, 0x119D7),
    (0x119DA, 0x119DB), (0x119E0, 0x119E0), (0x119E2, 0x119E2), (0x11A01, 0x11A0A), (0x11A33, 0x11A38),
    (0x11A3B, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96), (0x11A98, 0x11A9C),
    (0x11A9E, 0x11AA2), (0x11B00, 0x11B09), (0x11C30, 0x11C36), (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F),
    (0x11C41, 0x11C45), (0x11C70, 0x11C71), (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3),
    (0x11CB5, 0x11CB6), (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97), (0x11EF3, 0x11EF4),
    (0x11EF7, 0x11EF8), (0x11F00, 0x11F01), (0x11F36, 0x11F3A), (0x11F40, 0x11F40), (0x11F42, 0x11F4F),
    (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13440), (0x13447, 0x13455), (0x16E97, 0x16E9A),
    (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2), (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46),
    (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A),
    (0x1E08F, 0x1E08F), (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E4EC, 0x1E4EF),
    (0x1E944, 0x1E94A), (0x1E95E, 0x1E95F),
)

# Characters whose category changed since Unicode 8.0: their category then.
RECATEGORISED = {
    0x166D: "Po",  # CANADIAN SYLLABICS CHI SIGN, So since Unicode 12
    0x1734: "Mn",  # HANUNOO SIGN PAMUDPOD, Mc since Unicode 14
    0x1885: "Lo", 0x1886: "Lo",  # MONGOLIAN LETTER ALI GALI BALUDA, THREE BALUDA, Mn since Unicode 9
    0xA9BD: "Mc",  # JAVANESE CONSONANT SIGN KERET, Mn since Unicode 12
    0x111C9: "Po",  # SHARADA SANDHI MARK, Mn since Unicode 11
}

# One dictionary for the lookup, character -> category in Unicode 8.0.
_OLD = {chr(c): "Cn" for lo, hi in ADDED_SINCE_8 for c in range(lo, hi + 1)}
_OLD.update({chr(c): cat for c, cat in RECATEGORISED.items()})


def category(ch: str) -> str:
    """The general category of one character as the reference's Unicode 8.0 tables give it."""
    return _OLD.get(ch) or unicodedata.category(ch)
