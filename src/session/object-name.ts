/**
 * A SessionObject's name: `<session id>:<tenant>`, so another tenant's id maps to a different,
 * empty object and looks unknown (404).
 */
export function sessionObjectName(tenant: string, id: string): string {
  return `${id}:${tenant}`;
}

/** The tenant part of a SessionObject's name (after the 32-hex id and the colon). */
export function tenantOfObjectName(name: string): string {
  return name.slice(name.indexOf(":") + 1);
}
