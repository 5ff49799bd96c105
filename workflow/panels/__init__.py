"""Panels: several models as one role — sealed independent reviews, section-by-section writing."""
