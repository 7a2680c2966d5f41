/** A positive number from the environment (a bench's size or duration knob), else the default. */
export const num = (name: string, dflt: number): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : dflt;
};
