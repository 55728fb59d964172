/** The parsed JSON body of a response, typed loosely for assertions. */
export async function jsonOf(response: Response): Promise<any> {
  return response.json();
}
