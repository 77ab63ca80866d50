/**
 * The registry of work types by name. `builtInWorkTypes()` holds `sum`, `wordcount` and `noop`;
 * an app adds its own with `register` before the functions load (see README, "Add a work type").
 * Names follow the job schema's `workType` pattern so they are safe in logs and blob metadata.
 */
import { noopWorkType } from './noopWorkType';
import { sumWorkType } from './sumWorkType';
import { wordcountWorkType } from './wordcountWorkType';
import { type AnyWorkType, type Json, type WorkType } from './WorkType';

const NAME = /^[a-z][a-z0-9-]{0,39}$/;

export class WorkTypeRegistry {
  private readonly types = new Map<string, AnyWorkType>();

  register<P extends Json, R extends Json>(type: WorkType<P, R>): this {
    if (!NAME.test(type.name)) throw new Error(`Work type name "${type.name}" must match ${String(NAME)}`);
    if (this.types.has(type.name)) throw new Error(`Work type "${type.name}" is already registered`);
    // The registry forgets P and R (method parameters are bivariant); the pipeline only moves them as JSON.
    this.types.set(type.name, type);
    return this;
  }

  get(name: string): AnyWorkType | undefined {
    return this.types.get(name);
  }

  names(): string[] {
    return [...this.types.keys()].sort();
  }
}

export function builtInWorkTypes(): WorkTypeRegistry {
  return new WorkTypeRegistry().register(sumWorkType).register(wordcountWorkType).register(noopWorkType);
}

/** The registry the app's functions use. Register your own types on it at module load. */
export const workTypes = builtInWorkTypes();
