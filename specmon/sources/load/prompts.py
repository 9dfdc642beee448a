"""The built-in prompt set: short prompts in categories that draft differently.

Written for specmon. Code and translation tend to be predictable (high acceptance),
open chat and creative writing less so, which is what makes per-category acceptance
worth watching.
"""

from __future__ import annotations

BUILTIN_PROMPTS: dict[str, tuple[str, ...]] = {
    "code": (
        "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
        "Implement binary search over a sorted list in Python and explain each branch in a comment.",
        "Write a SQL query that lists the ten customers with the highest total order value last month.",
        "Convert this loop to a list comprehension: result = []; for x in items: if x > 0: result.append(x * 2)",
        "Write a Bash script that prints the five largest files under the current directory.",
        "Write a Rust function that reverses the words of a sentence without allocating per word.",
    ),
    "math": (
        "Solve for x: 3x + 7 = 22. Show each step.",
        "A train travels 180 km in 2.5 hours. What is its average speed in km/h and in m/s?",
        "What is the sum of the integers from 1 to 250? Explain the formula you use.",
        "Factor the polynomial x^2 - 5x + 6 and give both roots.",
        "A rectangle has a perimeter of 36 cm and its length is twice its width. Find its area.",
        "Compute the derivative of f(x) = x^3 * sin(x) and simplify.",
    ),
    "qa": (
        "What causes the seasons on Earth?",
        "Why is the sky blue during the day and red at sunset?",
        "What is the difference between a virus and a bacterium?",
        "How does a refrigerator keep food cold?",
        "Who proposed the theory of general relativity, and what does it describe?",
        "What is the boiling point of water at the top of a high mountain, and why is it different?",
    ),
    "summarization": (
        "Summarize in three sentences: The city council met on Tuesday to discuss the new bus routes. "
        "Residents of the northern district complained that the changes doubled their commute, while "
        "the transit authority argued that ridership data justified moving buses to the busier center. "
        "The council agreed to a three-month trial and a public review at its end.",
        "Summarize the plot of a story in which a lighthouse keeper finds a message in a bottle that "
        "was written by his grandfather fifty years earlier, and sets out to find the person it names.",
        "Give a one-paragraph summary of how photosynthesis turns light, water and carbon dioxide into sugar.",
        "Summarize the main arguments for and against a four-day working week in a short bullet list.",
        "Summarize this changelog for end users: fixed a crash on startup when the config folder is "
        "missing; the export dialog now remembers the last folder; dark theme contrast improved; "
        "dropped support for the legacy plugin format.",
        "Summarize the water cycle for a ten-year-old in four sentences.",
    ),
    "translation": (
        "Translate into French: The meeting has been moved to Thursday afternoon at three o'clock.",
        "Translate into German: Please close the window before you leave the office.",
        "Translate into Spanish: The library opens at nine in the morning and closes at eight in the evening.",
        "Translate into Italian: I would like a table for two people near the window, please.",
        "Translate into English: Le chat dort sur le canapé depuis ce matin.",
        "Translate into Portuguese: The train to the airport leaves every fifteen minutes.",
    ),
    "chat": (
        "Hi! I just moved to a new city and I don't know anyone. Any ideas for meeting people?",
        "I can't decide between learning the guitar and learning the piano. What do you think?",
        "My houseplant's leaves are turning yellow. What could be wrong?",
        "Can you recommend a relaxing way to spend a rainy Sunday?",
        "I have a job interview tomorrow and I'm nervous. How should I prepare tonight?",
        "What's a good name for a small grey cat who likes to sleep in boxes?",
    ),
    "reasoning": (
        "Alice is older than Bob, and Bob is older than Carol. Is Carol older than Alice? Explain.",
        "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies? Reason step by step.",
        "You have two jugs of 3 and 5 litres. How do you measure exactly 4 litres of water?",
        "A farmer must cross a river with a wolf, a goat and a cabbage. Describe a safe plan.",
        "Three boxes are labelled apples, oranges and mixed, and every label is wrong. "
        "How can you fix the labels by taking out a single fruit?",
        "Which weighs more, a kilogram of feathers or a kilogram of iron? Explain the trick.",
    ),
    "writing": (
        "Write a short poem about the first snow of winter.",
        "Write the opening paragraph of a mystery novel set on a night train.",
        "Write a friendly email inviting colleagues to a farewell lunch on Friday.",
        "Write a product description for a reusable water bottle that keeps drinks cold for a day.",
        "Write a limerick about a programmer who forgot a semicolon.",
        "Write a two-paragraph story about a robot that learns to paint.",
    ),
}

CATEGORIES: tuple[str, ...] = tuple(BUILTIN_PROMPTS)

# Common short English words (each about one token) for synthetic prompts.
_SYNTHETIC_TEXT = (
    "the of and to in is it you that he was for on are with as his they be at one have this "
    "from or had by hot word but what some we can out other were all there when up use your "
    "how said an each she which do their time if will way about many then them write would "
    "like so these her long make thing see him two has look more day could go come did number "
    "sound no most people my over know water than call first who may down side been now find "
    "any new work part take get place made live where after back little only round man year "
    "came show every good me give our under name very through just form sentence great think "
    "say help low line differ turn cause much mean before move right boy old too same tell "
    "does set three want air well also play small end put home read hand port large spell add "
    "even land here must big high such follow act why ask men change went light kind off need "
    "house picture try us again animal point mother world"
)
SYNTHETIC_WORDS: tuple[str, ...] = tuple(_SYNTHETIC_TEXT.split())
