"""Modal screens of the console: help, confirmation, export, save-as prompt, diff."""
