"""sparse-tui: a terminal experiment console for studying the emergence of sparse attention.

Science: Zucchet et al. 2025, "The emergence of sparse attention: impact of data distribution and benefits of
repetition" (shared/reference/002_cc8574166552f4e6.txt), and Ziming Liu's blog reproductions.
"""

__version__ = "0.1.0"
