/**
 * The wall clock the job pipeline stamps its records with. Every part takes it as `now` in its deps
 * (a fake in tests); `nowOf` is the one place that defaults it to the system's. Not for measuring
 * durations (performance.now()) nor for orchestrations (they use the replay-safe context time).
 */
export type Now = () => Date;

export function nowOf(deps: { readonly now?: Now | undefined }): Now {
  return deps.now ?? (() => new Date());
}
