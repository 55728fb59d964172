import { ansiSegments, plainText } from './ansi.js';

const ESC = '\u001b';

describe('ansiSegments', () => {
  it('leaves a line without escapes as one plain segment', () => {
    expect(ansiSegments('Step 1/3 : FROM scratch')).toEqual([
      { text: 'Step 1/3 : FROM scratch', classes: '' },
    ]);
  });

  it('turns SGR colours and weights into classes, and reset back to plain', () => {
    expect(ansiSegments(`${ESC}[1;31mERROR${ESC}[0m: ${ESC}[92mok${ESC}[39m done`)).toEqual([
      { text: 'ERROR', classes: 'fg-1 bold' },
      { text: ': ', classes: '' },
      { text: 'ok', classes: 'fg-10' },
      { text: ' done', classes: '' },
    ]);
  });

  it('maps 256-colour and true-colour codes to the nearest of the 16', () => {
    expect(ansiSegments(`${ESC}[38;5;196mred${ESC}[m`)).toEqual([{ text: 'red', classes: 'fg-9' }]);
    expect(ansiSegments(`${ESC}[38;2;0;0;255mblue${ESC}[m`)).toEqual([
      { text: 'blue', classes: 'fg-12' },
    ]);
    expect(ansiSegments(`${ESC}[48;5;2mbg${ESC}[m`)).toEqual([{ text: 'bg', classes: 'bg-2' }]);
  });

  it('drops cursor moves, titles and hyperlinks, keeping their text as text', () => {
    const line = `${ESC}[2K${ESC}[1G${ESC}]0;title\u0007${ESC}]8;;https://x.example${ESC}\\link${ESC}]8;;${ESC}\\ <b>&amp;</b>`;
    expect(ansiSegments(line)).toEqual([{ text: 'link <b>&amp;</b>', classes: '' }]);
    expect(plainText(line)).toBe('link <b>&amp;</b>');
  });

  it('takes malformed parameters as 0 and never throws', () => {
    expect(ansiSegments(`${ESC}[;1mx${ESC}[38;5my`)).toEqual([{ text: 'xy', classes: 'bold' }]);
  });
});
