export declare const NODE_MAJOR_NEEDED: number;
export declare function oldNodeProblem(version: string): string | null;
