/**
 * A SessionObject's name: `<session id>:<tenant>`, so another tenant's id maps to a different,
 * empty object and looks unknown (404).
 */
export function sessionObjectName(tenant: string, id: string): string {
  return `${id}:${tenant}`;
}
