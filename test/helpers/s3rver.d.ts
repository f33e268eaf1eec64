/** The part of @20minutes/s3rver's API the tests use (the package ships no types). */
declare module "@20minutes/s3rver" {
  import type { AddressInfo } from "node:net";
  export default class S3rver {
    constructor(options: { address: string; port: number; directory: string; silent?: boolean; configureBuckets?: { name: string }[] });
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
    on(event: "event", listener: (e: { Records: { s3: { object: { key: string } } }[] }) => void): this;
  }
}
