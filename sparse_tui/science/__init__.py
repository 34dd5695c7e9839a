"""The science, torch-free: the paper's theory, repetition and learning-rate schedules, power-law fits, the live
emergence forecast, embedding geometry and phase grids."""
