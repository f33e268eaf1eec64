/**
 * The part of `pg` the Worker uses, typed here because @types/pg pulls Node's globals into the
 * Worker's type space (tsconfig.json maps "pg" to this file; the runner-host keeps @types/pg).
 */
declare const pg: {
  Client: new (o: { connectionString: string }) => {
    connect(): Promise<void>;
    query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
    end(): Promise<void>;
  };
};
export default pg;
