// Loaded before first paint (a classic script, not a module), so a dark page never flashes light.
try {
  const theme = localStorage.getItem('dsh.theme');
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
} catch {
  // Storage may be off (private mode): the system preference applies.
}
