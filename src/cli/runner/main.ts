// Placeholder: the reference runner comes with its own issue.
export async function runnerMain(_args: string[]): Promise<number> {
  process.stderr.write("hangar runner: not available yet\n");
  return 1;
}
