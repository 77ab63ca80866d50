import { CoordinatorError } from '../errors';

/** A setting is missing or wrong. The message names the setting and never contains its value when it may hold a secret. */
export class ConfigError extends CoordinatorError {
  override readonly name = 'ConfigError';
  constructor(
    readonly setting: string,
    detail: string,
  ) {
    super('CONFIG_INVALID', `Setting ${setting}: ${detail}`, true);
  }
}
