"""Readers for other tools' files (AIPerf exports) so specmon can be checked against them."""
