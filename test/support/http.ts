/** The parsed JSON body of a response, typed loosely for assertions. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function jsonOf(response: Response): Promise<any> {
  return response.json();
}
